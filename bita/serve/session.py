"""A browser session's chat: the messages the model reads, the passes behind each answer, and the
what-if branch last forced from one of them; or a saved decoding opened from a file, to view.

The page keeps one ``Conversation`` per session in a ``gr.State``; the chat, the inspector, a
clicked token and the branch all read it. An answer is named by its index in the chat, or BRANCH.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from dataclasses import dataclass, field

from viz.tokens import output_html

from ..branch import BranchRecord, forced
from ..decode.records import StepRecord
from ..decode.sampling import Sampling
from ..errors import BitaError
from ..model.adapter import BitaAdapter
from ..plan.tree_plan import TreePlan
from ..saved import SavedDecoding

BRANCH = "branch"  # the name of the what-if branch among a conversation's answers


@dataclass(frozen=True)
class Settings:
    """What one request runs with: the adapter, its tree plan, the answer's length and the sampling, and the
    names they were chosen by (for a branch's replay record)."""

    adapter: BitaAdapter
    plan: TreePlan
    max_new_tokens: int
    sampling: Sampling
    adapter_name: str
    tree: str
    drafts: str


@dataclass
class Turn:
    """One answer: the prompt ids it continued, the passes that produced it, the settings it ran with, and
    whether it is still streaming; or ``saved``, a saved decoding opened from a file, with its prompt ids and passes
    (no Settings: it was decoded elsewhere)."""

    prompt_ids: list[int]
    records: list[StepRecord] = field(default_factory=list)
    settings: Settings | None = None
    streaming: bool = False
    saved: SavedDecoding | None = None

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
    branch: Turn | None = None

    @classmethod
    def of_saved(cls, saved: SavedDecoding, prompt: str) -> Conversation:
        """A conversation that shows ``saved``: its ``prompt`` (the text the model read) and its answer."""
        return cls([{"role": "user", "content": prompt}, {"role": "assistant", "content": saved.text}],
                   [Turn(saved.prompt_ids, list(saved.steps), saved=saved)])

    @property
    def opened(self) -> bool:
        """Whether this shows a saved decoding opened from a file: to view, not to continue (its prompt is the text
        the model read, chat template and all, not a message)."""
        return any(turn.saved is not None for turn in self.turns)

    def answer(self, key: int | str) -> Turn:
        """Answer ``key``: an index into ``turns`` (-1: the last), or BRANCH."""
        return self.branch if key == BRANCH else self.turns[int(key)]

    def has(self, key: int | str) -> bool:
        """Whether answer ``key`` exists."""
        return self.branch is not None if key == BRANCH else -len(self.turns) <= int(key) < len(self.turns)

    def label(self, key: int | str) -> str:
        """What the page calls answer ``key``: 'answer 2', or 'the what-if branch'."""
        return "the what-if branch" if key == BRANCH else f"answer {int(key) % len(self.turns) + 1}"

    def branch_record(self, key: int | str, choice: str) -> BranchRecord:
        """The branch of answer ``key`` that ``choice`` ('POSITION:TOKEN', ids) forces, with that answer's
        settings; BitaError while an answer streams, or where ``choice`` is not two whole numbers."""
        if any(turn.streaming for turn in [*self.turns, self.branch] if turn is not None):
            raise BitaError("an answer is still streaming: wait for it to finish (or press Stop), then force a token")
        if self.has(key) and self.answer(key).saved is not None:
            raise BitaError("an answer opened from a file is there to view: ask its question in the chat to force one "
                            "of its tokens")
        if not self.has(key) or self.answer(key).settings is None:
            raise BitaError("send a message first, then click one of the answer's tokens")
        position, token = forced(choice)
        turn = self.answer(key)
        settings = turn.settings
        sampling = settings.sampling
        return BranchRecord(turn.prompt_ids, turn.tokens, position, token, settings.adapter_name,
                            settings.tree, settings.drafts, settings.max_new_tokens, sampling.temperature,
                            sampling.top_p, sampling.top_k, sampling.seed)

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
