"""The inspector: one forward pass of an answer at a time, and the handlers that move it.

Each view is (pass slider, draft tree figure, the pass's verification in sentences, attention
figure). The handlers read the session's ``Conversation`` and which answer is inspected
(``turn_index``; -1: the last).
"""

from __future__ import annotations

import gradio as gr

from viz.attention import attention_figure
from viz.draft_tree import draft_tree_figure
from viz.explain import verification_steps
from viz.notice import notice_figure

from .engine import Engine
from .session import Conversation


class Inspector:
    """The inspector's views and its handlers: the slider, previous and next, play, and a clicked
    chat token. Draws with ``engine``'s tokenizer; never runs the model."""

    def __init__(self, engine: Engine):
        self.engine = engine

    def pass_views(self, conversation: Conversation, turn_index: int, index: int) -> tuple:
        """The views of pass ``index`` (clamped to the answer's passes) of answer ``turn_index``."""
        turns = conversation.turns
        if not turns or not turns[turn_index].records:
            empty = notice_figure("Send a message: each forward pass of the answer shows here.")
            return gr.skip(), empty, "", empty
        turn = turns[turn_index]
        last = len(turn.records) - 1
        index = max(0, min(int(index), last))
        record = turn.records[index]
        slider = gr.Slider(minimum=0, maximum=max(1, last), value=index, step=1, interactive=last > 0,
                           label=f"forward pass of answer {turn_index % len(turns) + 1}")
        tree = draft_tree_figure(record, self.engine.decode)
        story = f"**Pass {record.index}**\n\n" + "\n\n".join(verification_steps(record, self.engine.decode))
        if record.attention is None:
            return slider, tree, story, notice_figure(f"Pass {record.index} is a plain AR pass: one row, causal "
                                                      "attention.")
        return slider, tree, story, attention_figure(record, self.engine.decode, turn.context(index))

    def picked_token(self, picked: str, conversation: Conversation) -> tuple:
        """A click on a chat token ("turn:pass:time" from assets/app.js): (inspected answer, that
        answer's pass views)."""
        turn_index, index = (int(part) for part in picked.split(":")[:2])
        if turn_index >= len(conversation.turns):
            return (gr.skip(),) * 5
        return turn_index, *self.pass_views(conversation, turn_index, index)

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
