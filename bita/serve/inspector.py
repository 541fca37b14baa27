"""The inspector: one forward pass of an answer at a time, and the handlers that move it.

Each view is (pass slider, draft tree figure, the pass's verification in sentences with the next
pass's drafts, attention figure, the top alternatives of one of its tokens, and how that token was drawn
where the answer sampled). The handlers read the
session's ``Conversation`` and which answer is inspected (``turn_index``; -1: the last).
"""

from __future__ import annotations

import gradio as gr

from viz.alternatives import alternatives_figure
from viz.attention import attention_figure
from viz.draft_tree import draft_tree_figure
from viz.explain import next_drafts_table, verification_steps
from viz.notice import notice_figure
from viz.warp import warp_views

from .engine import Engine
from .session import Conversation


class Inspector:
    """The inspector's views and its handlers: the slider, previous and next, play, and a clicked
    chat token. Draws with ``engine``'s tokenizer; never runs the model."""

    def __init__(self, engine: Engine):
        self.engine = engine

    def pass_views(self, conversation: Conversation, turn_index: int, index: int, slot: int = -1) -> tuple:
        """The views of pass ``index`` (clamped to the answer's passes) of answer ``turn_index``; the
        alternatives are those of its token ``slot`` (-1: its last)."""
        turns = conversation.turns
        if not turns or not turns[turn_index].records:
            empty = notice_figure("Send a message: each forward pass of the answer shows here.")
            return gr.skip(), empty, "", empty, empty, empty
        turn = turns[turn_index]
        last = len(turn.records) - 1
        index = max(0, min(int(index), last))
        record = turn.records[index]
        slider = gr.Slider(minimum=0, maximum=max(1, last), value=index, step=1, interactive=last > 0,
                           label=f"forward pass of answer {turn_index % len(turns) + 1}")
        tree = draft_tree_figure(record, self.engine.decode)
        decode = self.engine.decode
        warp, race = warp_views(record, slot, decode)
        parts = [f"**Pass {record.index}**", *verification_steps(record, decode), race,
                 next_drafts_table(record, decode)]
        story = "\n\n".join(part for part in parts if part)
        alternatives = alternatives_figure(record, slot, decode)
        if record.attention is None:
            return slider, tree, story, notice_figure(f"Pass {record.index} is a plain AR pass: one row, causal "
                                                      "attention."), alternatives, warp
        return slider, tree, story, attention_figure(record, decode, turn.context(index)), alternatives, warp

    def picked_token(self, picked: str, conversation: Conversation) -> tuple:
        """A click on a chat token ("turn:pass:slot:time" from assets/app.js): (inspected answer, the views
        of that answer's pass, with the alternatives of the clicked token)."""
        turn_index, index, slot = (int(part) for part in picked.split(":")[:3])
        if turn_index >= len(conversation.turns):
            return (gr.skip(),) * 7
        return turn_index, *self.pass_views(conversation, turn_index, index, slot)

    def stepped(self, by: int):
        """A handler of (slider value, conversation, inspected answer): the views ``by`` passes on."""
        def step(index, conversation: Conversation, turn_index: int) -> tuple:
            return self.pass_views(conversation, turn_index, int(index) + by)
        return step

    def played(self, index, conversation: Conversation, turn_index: int) -> tuple:
        """One timer tick of play: the next pass's views, then (timer, play button, playing),
        stopped after the last pass."""
        records = conversation.turns[turn_index].records if conversation.turns else []
        ended = int(index) + 1 >= len(records) - 1
        stopped = (gr.Timer(active=False), gr.Button(value="▶ Play"), False) if ended else (gr.skip(),) * 3
        return *self.pass_views(conversation, turn_index, int(index) + 1), *stopped


def toggled(playing: bool) -> tuple:
    """The play button pressed: (timer, play button, playing), switched."""
    playing = not playing
    return gr.Timer(active=playing), gr.Button(value="⏸ Pause" if playing else "▶ Play"), playing
