"""The inspector: one forward pass of an answer at a time, and the handlers that move it.

Each view is (pass slider, draft tree figure, the pass's verification in sentences with the next
pass's drafts, attention figure, the top alternatives of one of its tokens, and how that token was drawn
where the answer sampled). The handlers read the
session's ``Conversation`` and which answer is inspected (an index, -1: the last; or the what-if branch).
"""

from __future__ import annotations

import gradio as gr

from viz.alternatives import alternatives_figure
from viz.attention import attention_figure
from viz.branch import force_choices
from viz.draft_tree import draft_tree_figure
from viz.explain import mask_proposals_table, next_drafts_table, verification_steps
from viz.notice import notice_figure
from viz.warp import warp_views

from .engine import Engine
from .session import BRANCH, Conversation


class Inspector:
    """The inspector's views and its handlers: the slider, previous and next, play, and a clicked
    chat token. Draws with ``engine``'s tokenizer; never runs the model."""

    def __init__(self, engine: Engine):
        self.engine = engine

    def pass_views(self, conversation: Conversation, key: int | str, index: int, slot: int = -1) -> tuple:
        """The views of pass ``index`` (clamped to the answer's passes) of answer ``key`` (an index into the
        chat's answers, or BRANCH); the alternatives are those of its token ``slot`` (-1: its last)."""
        if not conversation.has(key) or not conversation.answer(key).records:
            empty = notice_figure("Send a message: each forward pass of the answer shows here.")
            return gr.skip(), empty, "", empty, empty, empty
        turn = conversation.answer(key)
        last = len(turn.records) - 1
        index = max(0, min(int(index), last))
        record = turn.records[index]
        slider = gr.Slider(minimum=0, maximum=max(1, last), value=index, step=1, interactive=last > 0,
                           label=f"forward pass of {conversation.label(key)}")
        tree = draft_tree_figure(record, self.engine.decode)
        decode = self.engine.decode
        warp, race = warp_views(record, slot, decode)
        proposed = mask_proposals_table(turn.records[index - 1], record, decode) if index else ""
        parts = [f"**Pass {record.index}**", proposed, *verification_steps(record, decode), race,
                 next_drafts_table(record, decode)]
        story = "\n\n".join(part for part in parts if part)
        alternatives = alternatives_figure(record, slot, decode)
        if record.attention is None:
            return slider, tree, story, notice_figure(f"Pass {record.index} is a plain AR pass: one row, causal "
                                                      "attention."), alternatives, warp
        return slider, tree, story, attention_figure(record, decode, turn.context(index)), alternatives, warp

    def picked_token(self, picked: str, conversation: Conversation) -> tuple:
        """A click on a chat or branch token ("turn:pass:slot:time" from assets/app.js, turn an index or
        BRANCH): (inspected answer, the views of that answer's pass with the alternatives of the clicked
        token, the tokens it offers to force)."""
        key, index, slot = picked.split(":")[:3]
        key = key if key == BRANCH else int(key)
        if not conversation.has(key):
            return (gr.skip(),) * 8
        turn = conversation.answer(key)
        index = max(0, min(int(index), len(turn.records) - 1))
        offset = sum(len(r.emitted) for r in turn.records[:index])
        choices = force_choices(turn.records[index], int(slot), offset, self.engine.decode)
        return (key, *self.pass_views(conversation, key, index, int(slot)),
                gr.Dropdown(choices=choices, value=choices[0][1] if choices else None))

    def stepped(self, by: int):
        """A handler of (slider value, conversation, inspected answer): the views ``by`` passes on."""
        def step(index, conversation: Conversation, key: int | str) -> tuple:
            return self.pass_views(conversation, key, int(index) + by)
        return step

    def played(self, index, conversation: Conversation, key: int | str) -> tuple:
        """One timer tick of play: the next pass's views, then (timer, play button, playing),
        stopped after the last pass."""
        records = conversation.answer(key).records if conversation.has(key) else []
        ended = int(index) + 1 >= len(records) - 1
        stopped = (gr.Timer(active=False), gr.Button(value="▶ Play"), False) if ended else (gr.skip(),) * 3
        return *self.pass_views(conversation, key, int(index) + 1), *stopped


def toggled(playing: bool) -> tuple:
    """The play button pressed: (timer, play button, playing), switched."""
    playing = not playing
    return gr.Timer(active=playing), gr.Button(value="⏸ Pause" if playing else "▶ Play"), playing
