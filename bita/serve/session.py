"""A browser session's chat: the messages the model reads and the passes behind each answer.

The page keeps one ``Conversation`` per session in a ``gr.State``; the chat, the inspector and a
clicked token all read it.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from dataclasses import dataclass, field

from viz.tokens import output_html

from ..decode.records import StepRecord


@dataclass
class Turn:
    """One answer: the prompt ids it continued and the passes that produced it."""

    prompt_ids: list[int]
    records: list[StepRecord] = field(default_factory=list)

    @property
    def tokens(self) -> list[int]:
        return [t for r in self.records for t in r.emitted]

    def context(self, index: int) -> list[int]:
        """Ids before the root of pass ``index`` (labels of its cached columns)."""
        emitted = [t for r in self.records[:index] for t in r.emitted]
        return (self.prompt_ids + emitted)[: self.records[index].position]


@dataclass
class Conversation:
    """A browser session's chat: plain-text messages (what the model reads) and the turns behind
    the answers (what the page shows: answer i is ``turns[i]``)."""

    messages: list[dict] = field(default_factory=list)
    turns: list[Turn] = field(default_factory=list)

    def shown(self, decode: Callable[[list[int]], str], since: int = 0) -> list[dict]:
        """The messages from index ``since`` on as the page shows them: user text escaped, each
        answer coloured token by token. A streaming answer renders the earlier ones once."""
        shown, answers = [], enumerate(self.turns)
        for position, message in enumerate(self.messages):
            answer = next(answers) if message["role"] == "assistant" else None
            if position < since:
                continue
            content = (html.escape(message["content"]) if answer is None else
                       output_html(answer[1].records, decode, turn=answer[0]))
            shown.append({"role": message["role"], "content": content})
        return shown
