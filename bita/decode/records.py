"""Step records: one per forward pass, the data the app, the CLI and the benchmarks render."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ..drafts.sources import MASK
from ..drafts.tree import ROOT, DraftTree, TreeNode
from ..drafts.trie import NGRAM_RANK, PassTrie
from .explain import RowVerdict
from .masks import PassLayout, allowed_keys
from .verify import Verification, walk

ACCEPTED, REJECTED = "accepted", "rejected"
BONUS = "bonus"  # role of an emitted token that is the pass's own (autoregressive) token


def accepted_role(depth: int) -> str:
    """Role of an emitted token that was an accepted draft at ``depth`` (1-based): 'accepted-1', ..."""
    return f"accepted-{depth}"


@dataclass
class DraftNode:
    """A candidate fed in this pass: ``parent`` is a node index, or -1 for the root."""

    token: int
    parent: int
    depth: int
    rank: int  # among the mask drafts of its depth; -1 when only the n-gram chain proposed it
    prob: float  # draft probability (softmax of the mask's logits) of ``token``; 0 for n-gram-only nodes
    has_group: bool
    status: str  # ACCEPTED | REJECTED
    source: str = MASK  # who proposed it: MASK | NGRAM | BOTH (bita/drafts/sources.py)
    chance: float | None = None  # a dynamic tree's estimate that it is accepted (what chose it); else None


@dataclass
class StepRecord:
    """What one forward pass took in and gave out.

    kind: "prefill" (prompt + first mask group), "tree" (BiTA verify-and-draft), or "ar".
    position: position of the root row (context length before the pass).
    root: token fed as root (the previous pass's bonus); in a prefill, the last prompt token.
    rows: new rows fed (ordinary + candidates + masks).
    nodes: the draft tree of this pass.
    accepted: tokens of accepted drafts, root to leaf.
    bonus: the model's own next token after the accepted drafts (always correct).
    emitted: tokens this pass adds to the output (accepted + bonus, cut at a stop).
    next_drafts: per depth, (token, prob) candidates drafted for the next pass.
    seconds: wall time of the forward pass and its verification (device-synchronised).
    pass_seconds: of ``seconds``, the model's pass and LM head alone (device-synchronised): the rest is host
        work (drafts, tree, verification walk, cache compaction, records).
    finish: "eos" | "stop" | "length" once generation ends at this pass, else None.
    sampled: the pass sampled (temperature > 0): each accepted draft and the bonus won the race at
        their row (argmax of the model's probabilities over their position's random vector: what AR
        sampling draws there with the same seed, bita/decode/verify.py); else both are argmaxes.
    attention: on request, bool [rows, P + C + rows] key visibility of each new row.
    row_kinds: on request, per new row "context" | "root" | "candidate" | "mask".
    verdicts: on request, one per token of ``emitted``: what the verifier's row that chose it said
        (bita/decode/explain.py); else empty.
    """

    index: int
    kind: str
    position: int
    root: int
    rows: int
    nodes: list[DraftNode] = field(default_factory=list)
    accepted: list[int] = field(default_factory=list)
    bonus: int = -1
    emitted: list[int] = field(default_factory=list)
    next_drafts: list[list[tuple[int, float]]] = field(default_factory=list)
    seconds: float = 0.0
    pass_seconds: float = 0.0
    finish: str | None = None
    attention: torch.Tensor | None = None
    row_kinds: list[str] | None = None
    n_prompt: int = 0
    sampled: bool = False
    verdicts: list[RowVerdict] = field(default_factory=list)

    def emit(self, kept: list[int], finish: str | None) -> None:
        """Set what this pass emits (``kept``: a prefix of ``accepted + [bonus]``, cut where generation ends)
        and why it ends there (None: it goes on); the verdicts are cut alike."""
        self.emitted, self.finish, self.verdicts = kept, finish, self.verdicts[:len(kept)]

    def draft_tree(self) -> DraftTree:
        """The shape of this pass's candidates: ``nodes`` without their tokens and statuses."""
        return DraftTree(tuple(TreeNode(n.parent, n.depth, n.rank, n.has_group) for n in self.nodes))

    def accepted_nodes(self) -> tuple[int, ...]:
        """Indices into ``nodes`` of the accepted path, root to leaf: the verification walk replayed."""
        return walk(self.draft_tree(),
                    lambda _, children: next((c for c in children if self.nodes[c].status == ACCEPTED), None))

    def rejected_alternatives(self) -> list[DraftNode]:
        """The drafts that lost to the bonus token: REJECTED children of the last accepted node (of
        the root when none was accepted), best rank first. Other rejected nodes either lost to an
        accepted sibling or hang below a rejected draft (never checked), so are left out."""
        path = self.accepted_nodes()
        last = path[-1] if path else ROOT
        return sorted((n for n in self.nodes if n.parent == last and n.status == REJECTED), key=lambda n: n.rank)

    def emitted_roles(self) -> list[str]:
        """Role of each token of ``emitted`` (a prefix of ``accepted + [bonus]``): ``accepted_role(d)`` or BONUS."""
        return [accepted_role(i + 1) if i < len(self.accepted) else BONUS for i in range(len(self.emitted))]

    def emitted_sources(self) -> list[str | None]:
        """Who proposed each token of ``emitted``: its accepted node's source (MASK, NGRAM or BOTH),
        None for the bonus."""
        path = [self.nodes[i].source for i in self.accepted_nodes()]
        return [path[i] if i < len(path) else None for i in range(len(self.emitted))]


@dataclass(frozen=True)
class Candidates:
    """What one tree pass fed as candidates: ``trie`` (bita/drafts/trie.py); ``chances``: a dynamic tree's
    estimate for each of its mask nodes (None: a static tree); ``probs``: [depth, k] the probabilities of
    the mask drafts its mask nodes took (None: no mask drafts)."""

    trie: PassTrie
    chances: list[float] | None
    probs: torch.Tensor | None


def tree_record(*, index: int, position: int, root: int, candidates: Candidates, verdict: Verification,
                next_drafts: list[list[tuple[int, float]]], rows: int, n_prompt: int, sampled: bool) -> StepRecord:
    """The record of tree pass ``index``, whose root ``root`` sat at ``position``, that fed ``rows`` rows of
    which ``candidates``, reached ``verdict`` and drafted ``next_drafts``."""
    trie, chances, accepted = candidates.trie, candidates.chances, set(verdict.accepted)
    probs = candidates.probs.tolist() if candidates.probs is not None else None  # one conversion, not one a node
    nodes = [DraftNode(trie.tokens[i], n.parent, n.depth, n.rank,
                       probs[n.depth - 1][n.rank] if n.rank != NGRAM_RANK else 0.0,
                       n.has_group, ACCEPTED if i in accepted else REJECTED, trie.sources[i],
                       chances[i] if chances and i < len(chances) else None)
             for i, n in enumerate(trie.tree.nodes)]
    return StepRecord(index=index, kind="tree", position=position, root=root, rows=rows, nodes=nodes,
                      accepted=[trie.tokens[i] for i in verdict.accepted], bonus=verdict.bonus,
                      next_drafts=next_drafts, n_prompt=n_prompt, sampled=sampled)


def attach_attention(record: StepRecord, layout: PassLayout, n_prompt: int, n_cached: int, wanted: bool) -> None:
    """When ``wanted``, set ``record.attention`` and ``record.row_kinds`` for a pass of ``layout``."""
    if not wanted:
        return
    record.attention = allowed_keys(layout, n_prompt, n_cached)
    kinds = ["context"] * (layout.chain - 1) + ["root"] + ["candidate"] * layout.tree.size
    record.row_kinds = kinds + ["mask"] * (layout.rows - len(kinds))
