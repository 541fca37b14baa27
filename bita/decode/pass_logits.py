"""What one pass's LM head gives and what it decides: the logits of its verified rows and mask groups,
the verdict of the verification walk on them, and the drafts of the group that drafts next.

One LM-head call covers the verified rows and the mask groups, so the head's weights (a fifth of a
small model's) are read once per pass, unless the groups add many rows (``one_head_call``). ``queue_judgement``
queues the verdict behind the pass where the walk runs on the device, and reads it when asked.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..drafts.dynamic import DynamicShape
from ..drafts.tree import ROOT, DraftTree
from ..drafts.trie import PassTrie
from ..runtime.runtime import Runtime
from .device_walk import on_device, queue_walk
from .masks import PassLayout
from .mask_drafts import draft_choice, raced_vectors
from .sampling import GREEDY, Sampling
from .verify import AheadNoise, RowNoise, Verification, argmaxes, verify_greedy, verify_sampling

# A second LM-head call reads the head's weights again; on a 2-core CPU that costs about as
# much as 16 more rows in the first call (measured), so groups adding more rows get their own call.
# On a GPU a call is launch-bound and rows nearly free: one call always.
MAX_SHARED_HEAD_ROWS = 16


@dataclass
class Drafts:
    """Top-k drafts for the next pass: tokens and probs are [depth, k]."""

    tokens: torch.Tensor
    probs: torch.Tensor

    def as_lists(self) -> list[list[tuple[int, float]]]:
        return [list(zip(t.tolist(), p.tolist())) for t, p in zip(self.tokens, self.probs)]


def drafts_from(logits: torch.Tensor, k: int, sampling: Sampling = GREEDY,
                vectors: torch.Tensor | None = None) -> Drafts:
    """Mask-group logits [depth, V] -> k drafts per depth on the host (bita/decode/mask_drafts.py: the most probable,
    or sampled with ``vectors`` raced)."""
    probs, tokens = draft_choice(logits, k, sampling, vectors)
    return Drafts(tokens.cpu(), probs.cpu())


@dataclass(frozen=True)
class PassLogits:
    """verified: [verified, V] the root's row, then each node's; group(g): [depth, V] mask group g's (its
    index in ``layout.group_rows``); every: [G, depth, V] every group's where one head call made them."""

    verified: torch.Tensor
    group: Callable[[int], torch.Tensor]
    every: torch.Tensor | None


def one_head_call(device: torch.device, group_rows: int) -> bool:
    """Whether a pass's verified rows and its ``group_rows`` mask-group rows share one LM-head call."""
    return device.type == "cuda" or group_rows <= MAX_SHARED_HEAD_ROWS


def pass_logits(runtime: Runtime, hidden: torch.Tensor, layout: PassLayout, verified: int) -> PassLogits:
    """The logits of a pass's first ``verified`` rows and of its mask groups, from hidden [R, H]; one head
    call when cheaper. A decoding pass's groups take the rows after its verified ones (``decode_layout`` with
    one ordinary row): the head reads hidden's first rows, with no index sent to the device (on a GPU such a copy
    waits for the pass, so the head and the verdict could not be queued behind it)."""
    groups = layout.group_rows
    if not one_head_call(hidden.device, (groups.shape[0] - 1) * groups.shape[1]):
        return PassLogits(runtime.logits(hidden[:verified]), lambda group: runtime.logits(hidden[groups[group]]),
                          None)
    logits = runtime.logits(hidden[:verified + groups.numel()])  # the groups' rows follow: no gather, no copy
    every = logits[verified:].view(*groups.shape, logits.shape[-1])
    return PassLogits(logits[:verified], lambda group: every[group], every)


Judgement = Callable[[], tuple[Verification, Drafts | None]]


def queue_judgement(trie: PassTrie, layout: PassLayout, logits: PassLogits, tree: DraftTree | DynamicShape,
                    sampling: Sampling, noise: RowNoise | None, candidate_ids: torch.Tensor,
                    ahead: AheadNoise | None = None) -> Judgement:
    """The verdict on a pass's candidates ``trie`` (the greedy walk on the argmax, or with ``sampling`` that
    samples, on race winners with ``noise``'s vectors: bita/decode/verify.py) and the drafts for the next
    pass (``tree.max_rank`` a depth from the mask group on the last accepted node, raced with ``ahead``'s vectors
    where given; None where it carries none), as a call that gives them. On a GPU (``device_walk.on_device``) the
    walk is queued there now, behind the pass, on ``candidate_ids`` ([N] long on the logits' device, ``trie.tokens``
    as the pass was sent them), and the call waits for its one copy back; elsewhere the call runs the walk in
    Python."""
    if on_device(logits.verified.device) and (logits.every is not None or tree.depth == 0):
        queued = queue_walk(trie.tree, candidate_ids, logits.verified, logits.every if tree.depth else None,
                            tree.max_rank, sampling, noise, ahead=ahead)

        def read() -> tuple[Verification, Drafts | None]:
            verdict, drafts = queued.read()
            return verdict, Drafts(*drafts) if drafts is not None else None
        return read
    return lambda: walk_on_host(trie, layout, logits, tree, sampling, noise, ahead)


def walk_on_host(trie: PassTrie, layout: PassLayout, logits: PassLogits, tree: DraftTree | DynamicShape,
                 sampling: Sampling, noise: RowNoise | None,
                 ahead: AheadNoise | None = None) -> tuple[Verification, Drafts | None]:
    """``queue_judgement``'s verdict and drafts by the walk in Python (verify.py), reading the rows it reaches."""
    if sampling.greedy:
        verdict = verify_greedy(trie.tree, trie.tokens, argmaxes(logits.verified))
    else:
        verdict = verify_sampling(trie.tree, trie.tokens, logits.verified, sampling, noise)
    if not (tree.depth > 0 and (verdict.last == ROOT or trie.tree.nodes[verdict.last].has_group)):
        return verdict, None
    group = logits.group(layout.group_of(verdict.last))  # [depth, V]
    vectors = raced_vectors(ahead, len(verdict.accepted), group.shape[0], group.shape[-1])
    return verdict, drafts_from(group, tree.max_rank, sampling, vectors)
