"""What one pass's LM head gives and what it decides: the logits of its verified rows and mask groups,
the verdict of the verification walk on them, and the drafts of the group that drafts next.

One LM-head call covers the verified rows and the mask groups, so the head's weights (a fifth of a
small model's) are read once per pass, unless the groups add many rows (``one_head_call``). ``judge`` is
pure: logits in, verdict and next drafts out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..drafts.dynamic import DynamicShape
from ..drafts.tree import ROOT, DraftTree
from ..drafts.trie import PassTrie
from ..runtime.runtime import Runtime
from .masks import PassLayout
from .sampling import Sampling
from .verify import RowNoise, Verification, verify_greedy, verify_sampling

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


def drafts_from(logits: torch.Tensor, k: int) -> Drafts:
    """Mask-group logits [depth, V] -> top-k drafts per depth."""
    top = torch.softmax(logits, dim=-1).topk(k, dim=-1)
    return Drafts(top.indices.cpu(), top.values.cpu())


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
    call when cheaper."""
    groups = layout.group_rows
    if not one_head_call(hidden.device, (groups.shape[0] - 1) * groups.shape[1]):
        return PassLogits(runtime.logits(hidden[:verified]), lambda group: runtime.logits(hidden[groups[group]]),
                          None)
    rows = torch.cat([torch.arange(verified), groups.flatten()])
    logits = runtime.logits(hidden[rows.to(hidden.device)])
    every = logits[verified:].view(*groups.shape, logits.shape[-1])
    return PassLogits(logits[:verified], lambda group: every[group], every)


def fused_readback(device: torch.device) -> bool:
    """Whether a greedy pass brings back its argmax and every group's drafts in one copy: on a GPU,
    where each copy back waits for the device; on a CPU the chosen group's alone is cheaper."""
    return device.type == "cuda"


def drafts_on_demand(group_logits: Callable[[int], torch.Tensor], k: int) -> Callable[[int], Drafts]:
    """A group's top-``k`` drafts by its index, computed when asked (one group's softmax)."""
    return lambda group: drafts_from(group_logits(group), k)


def read_greedy(logits: PassLogits, k: int) -> tuple[list[int], Callable[[int], Drafts]]:
    """The argmax of each verified row, and a function giving a group's top-``k`` drafts by index. With
    ``fused_readback`` and every group's logits at hand, both come back in one copy (ids as float64,
    exact); else the argmax now and a group's drafts when asked."""
    argmax = logits.verified.argmax(-1)
    if logits.every is None or not fused_readback(logits.verified.device):
        return argmax.tolist(), drafts_on_demand(logits.group, k)
    top = torch.softmax(logits.every, dim=-1).topk(k, dim=-1)  # [G, depth, k]
    packed = torch.cat([argmax.double(), top.indices.flatten().double(), top.values.flatten().double()]).cpu()
    count, shape = argmax.numel(), top.indices.shape
    tokens = packed[count:count + top.indices.numel()].long().view(shape)
    probs = packed[count + top.indices.numel():].to(top.values.dtype).view(shape)
    return packed[:count].long().tolist(), lambda group: Drafts(tokens[group], probs[group])


def judge(trie: PassTrie, layout: PassLayout, logits: PassLogits, tree: DraftTree | DynamicShape,
          sampling: Sampling, noise: RowNoise | None) -> tuple[Verification, Drafts | None]:
    """The verdict on a pass's candidates ``trie`` (the greedy walk on the argmax, or with ``sampling`` that
    samples, on race winners with ``noise``'s vectors: bita/decode/verify.py) and the drafts for the next
    pass: the top ``tree.max_rank`` of the mask group on the last accepted node, None where it carries none."""
    if sampling.greedy:
        argmax, group_drafts = read_greedy(logits, tree.max_rank)
        verdict = verify_greedy(trie.tree, trie.tokens, argmax)
    else:
        verdict = verify_sampling(trie.tree, trie.tokens, logits.verified, sampling, noise)
        group_drafts = drafts_on_demand(logits.group, tree.max_rank)
    carries_group = tree.depth > 0 and (verdict.last == ROOT or trie.tree.nodes[verdict.last].has_group)
    return verdict, group_drafts(layout.group_of(verdict.last)) if carries_group else None
