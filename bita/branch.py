"""What-if branches: force another token at one position of an answer and let BiTA continue from there.

A branch decodes with the answer's own settings from the context prompt + answer[:position] + [forced
token]. ``BranchRecord`` keeps all a branch needs (the prompt and answer ids, the position and forced token,
the settings by name), so it can be saved as JSON and replayed (``replay``, ``bita generate --force``).
Greedy, a replay gives the same branch on any tree (BiTA is lossless); sampled, the branch is what AR
sampling draws from that context with the record's seed (its draws start at the branch's first new token).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import asdict, dataclass, fields

from .decode.records import StepRecord
from .decode.sampling import Sampling
from .errors import BitaError
from .generate import Request, RunResult, collect, stream_bita
from .model.adapter import BitaAdapter
from .model.loading import LoadedModel
from .model.shipped import resolve_adapter
from .plan.tree_plan import TreePlan, plan_tree


@dataclass(frozen=True)
class BranchRecord:
    """A replayable branch. prompt_ids: what the answer continued (the chat template rendered); answer_ids:
    the answer; position: the answer's token the forced ``token`` replaces (0-based); adapter, tree, drafts:
    the settings' names; max_new_tokens: of the continuation after the forced token; temperature, top_p,
    top_k, seed: its sampling (temperature 0: greedy)."""

    prompt_ids: list[int]
    answer_ids: list[int]
    position: int
    token: int
    adapter: str
    tree: str
    drafts: str
    max_new_tokens: int
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int | None = None

    @property
    def context(self) -> list[int]:
        """The branch's prompt: prompt + the answer before ``position`` + the forced token."""
        return [*self.prompt_ids, *self.answer_ids[:self.position], self.token]

    @property
    def sampling(self) -> Sampling:
        return Sampling(self.temperature, self.top_p, self.top_k, self.seed)

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> BranchRecord:
        """The record ``to_json`` wrote; BitaError for anything else."""
        try:
            found = json.loads(text)
            return cls(**{f.name: found[f.name] for f in fields(cls) if f.name in found})
        except (ValueError, TypeError, KeyError) as error:
            raise BitaError(f"not a branch record: {error}") from None


def forced(text: str) -> tuple[int, int]:
    """(position, token id) of 'POSITION:TOKEN'; BitaError unless two whole numbers."""
    position, _, token = str(text or "").partition(":")
    if not (position.strip().isdigit() and token.strip().isdigit()):
        raise BitaError(f"a forced token is 'POSITION:TOKEN' (two whole numbers: the answer's token, from 0, and "
                        f"a token id), not {text!r}")
    return int(position), int(token)


def check_branch(record: BranchRecord, vocabulary: int) -> None:
    """BitaError unless ``record.position`` is a token of its answer and ``record.token`` an id of a
    tokenizer of ``vocabulary`` tokens."""
    answer = len(record.answer_ids)
    if not isinstance(record.position, int) or not 0 <= record.position < answer:
        raise BitaError(f"position {record.position!r} is not in the answer: it has {answer} tokens, "
                        f"positions 0 to {answer - 1}")
    if not isinstance(record.token, int) or not 0 <= record.token < vocabulary:
        raise BitaError(f"token id {record.token!r} is not in this tokenizer's vocabulary (ids 0 to {vocabulary - 1})")


def stream_branch(loaded: LoadedModel, adapter: BitaAdapter, plan: TreePlan, record: BranchRecord,
                  record_attention: bool = False, record_verdicts: bool = False) -> Iterator[StepRecord]:
    """The branch's BiTA step stream with ``adapter`` and ``plan`` (the record's settings, resolved), checked
    first (``check_branch``); the records as ``stream_bita`` makes them."""
    check_branch(record, len(loaded.tokenizer))
    return stream_bita(loaded, adapter, Request(record.context, record.max_new_tokens, plan, sampling=record.sampling,
                                                record_attention=record_attention, record_verdicts=record_verdicts))


def replay(loaded: LoadedModel, record: BranchRecord) -> RunResult:
    """The branch of ``record`` decoded again: its adapter and tree resolved by name here."""
    adapter = resolve_adapter(loaded, record.adapter)[0]
    plan = plan_tree(loaded, adapter, record.tree, record.drafts, sampling=record.sampling)
    return collect("bita", loaded, stream_branch(loaded, adapter, plan, record))
