"""The verification walk as tensor operations on the model's device, with one copy back a pass.

On a GPU every value read back waits for the device, and a walk in Python (verify.py) reads a row's choice
at every depth it reaches. Here the whole tree is judged at once, where the logits are:

- ``chosen`` [1 + N]: the token each verified row chooses: its argmax, or (sampled) its race winner
  argmax(p / E), p the row's warped distribution and E the race vector of the position it predicts (the
  vectors are drawn on the host, by position, as the walk in Python draws them: RaceNoise);
- node i matches when its token is ``chosen`` at its parent's row, and is *taken* when it matches and no
  sibling before it in rank order does (the walk's ``next(...)`` over children in rank order);
- node i is accepted when it and all its ancestors are taken; these nodes form one path from the root, and
  its deepest node is the last accepted (the root's row when none is);
- the bonus is ``chosen`` at that row, and the next drafts are the top-k of the mask group anchored there (sampled:
  raced with the vectors of the positions after the bonus, bita/decode/mask_drafts.py).

``queue_walk`` queues this behind the pass; ``QueuedWalk.read`` brings the last accepted row, the bonus and the
drafts back in one copy, and the accepted path is then read off the tree on the host. On a GPU the rules run as
one Triton kernel (walk_kernel.py), else as torch operations (``decided_by_torch``). Tested against the walk in
Python, greedy and sampled (tests/decode). Sampled, every row is warped here (a batched sort over the
vocabulary) where the walk in Python warps only the rows it reaches: cheap on a GPU, not on a CPU, which keeps
the walk in Python (``on_device``).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, fields
from functools import lru_cache
from importlib.util import find_spec

import torch

from ..drafts.tree import ROOT, DraftTree, full_tree
from ..runtime.device import to_device
from .mask_drafts import draft_choice, raced_vectors
from .sampling import Sampling, target_probs
from .verify import AheadNoise, RowNoise, Verification


def on_device(device: torch.device) -> bool:
    """Whether passes on ``device`` are judged by ``queue_walk``: on a GPU, where each copy back waits for
    the device; on a CPU the walk in Python is cheaper (it warps only the rows it reaches)."""
    return device.type == "cuda"


@dataclass(frozen=True)
class TreeTensors:
    """A draft tree of N nodes as int32 tensors on one device (views of one, contiguous).

    parent_row: [N], the verified row of each node's parent (0: the root's row, 1 + p: node p's).
    depth: [N], each node's depth (1 below the root).
    ancestry: [N, N], ancestry[i, j] 1: node j is node i or one of its ancestors (else 0).
    earlier_sibling: [N, N], earlier_sibling[i, j] 1: node j shares node i's parent and comes before it in
        rank order (then node index).
    group: [1 + N], per verified row the index of the mask group anchored there (layout.group_of), -1
        where none is.
    """

    parent_row: torch.Tensor
    depth: torch.Tensor
    ancestry: torch.Tensor
    earlier_sibling: torch.Tensor
    group: torch.Tensor


@lru_cache(maxsize=256)
def tree_tensors(tree: DraftTree, device: torch.device) -> TreeTensors:
    """``tree`` as TreeTensors on ``device`` (cached: a static tree's are made once), sent in one copy: views of
    one int32 tensor [2N + 2N^2 + 1 + N] (a trie that merges chains is a new tree most passes)."""
    size = tree.size
    parents = [node.parent for node in tree.nodes]
    lineage: list[list[int]] = []  # per node, itself and its ancestors (a parent comes before its children)
    for index, parent in enumerate(parents):
        lineage.append((lineage[parent] if parent != ROOT else []) + [index])
    ancestry = torch.zeros(size, size, dtype=torch.int32)
    ancestry[[i for i, line in enumerate(lineage) for _ in line], [j for line in lineage for j in line]] = 1
    order = {child: place for children in tree.children.values() for place, child in enumerate(children)}
    parent, place = torch.tensor(parents), torch.tensor([order[i] for i in range(size)])
    earlier = ((parent[:, None] == parent[None, :]) & (place[None, :] < place[:, None])).to(torch.int32)
    anchors = {anchor: group for group, anchor in enumerate(tree.group_anchors)}
    group = torch.tensor([anchors.get(row - 1 if row else ROOT, -1) for row in range(1 + size)], dtype=torch.int32)
    parent_row = (parent + 1).to(torch.int32)
    depth = torch.tensor([node.depth for node in tree.nodes], dtype=torch.int32)
    parts = (parent_row, depth, ancestry, earlier, group)
    packed = to_device(torch.cat([part.flatten() for part in parts]), device)  # queued behind the pass, no wait
    views, start = [], 0
    for part in parts:
        views.append(packed[start:start + part.numel()].view(part.shape))
        start += part.numel()
    return TreeTensors(*views)


def chosen_tokens(verified: torch.Tensor, sampling: Sampling, noise: RowNoise | None) -> torch.Tensor:
    """verified [1 + N, V] logits -> [1 + N] long: each row's argmax, or its race winner with ``noise``'s vector
    for the row (bita/decode/sampling.py: what AR draws at that row's position)."""
    if sampling.greedy:
        return verified.argmax(-1)
    probs = target_probs(verified, sampling)
    vectors = torch.stack([noise(row, probs.shape[-1]).to(probs.device) for row in range(probs.shape[0])])
    return torch.argmax(probs / vectors, -1)


def decided_by_torch(tensors: TreeTensors, tokens: torch.Tensor, chosen: torch.Tensor) -> torch.Tensor:
    """(last accepted row, bonus, group anchored there) [3] long: the verified row of the last accepted node (0:
    none, the root's), its choice and its group (-1: none); tokens [N] long the nodes' candidates, chosen [1 + N]
    long each row's choice. walk_kernel.py does the same in one launch."""
    if tokens.numel() == 0:
        last = torch.zeros(1, dtype=torch.long, device=chosen.device)
    else:
        matches = tokens == chosen[tensors.parent_row]
        taken = matches & ~(tensors.earlier_sibling.bool() & matches[None]).any(-1)
        accepted = ~(tensors.ancestry.bool() & ~taken[None]).any(-1)
        depth = torch.where(accepted, tensors.depth, 0)
        last = torch.where(depth.max() > 0, 1 + depth.argmax(), 0).view(1)
    # index_select, not indexing by a 0-d tensor, which reads it back (a sync on a GPU)
    return torch.cat([last, chosen.index_select(0, last), tensors.group.index_select(0, last).long()])


def decided_by_kernel(tensors: TreeTensors, tokens: torch.Tensor, chosen: torch.Tensor) -> torch.Tensor:
    """``decided_by_torch`` in one Triton launch (walk_kernel.py); an empty tree, the root's choice, by torch."""
    if tokens.numel() == 0:
        return decided_by_torch(tensors, tokens, chosen)
    from .walk_kernel import decide
    return decide(*(getattr(tensors, name.name) for name in fields(TreeTensors)), tokens, chosen)


HAS_TRITON = find_spec("triton") is not None  # looked up once, not every pass
Decider = Callable[[TreeTensors, torch.Tensor, torch.Tensor], torch.Tensor]


@lru_cache(maxsize=8)
def default_decider(device: torch.device) -> Decider:
    """On a GPU where Triton imports, the kernel once it agreed with the torch operations there
    (``kernel_disagrees``); else (with a warning where it did not) the torch operations."""
    if device.type != "cuda" or not HAS_TRITON:
        return decided_by_torch
    why = kernel_disagrees(device)
    if why is None:
        return decided_by_kernel
    warnings.warn(f"the verdict kernel {why} on {device}: the device walk runs torch operations", stacklevel=2)
    return decided_by_torch


def kernel_disagrees(device: torch.device, cases: int = 40) -> str | None:
    """Why the verdict kernel may not judge passes on ``device`` (None: it may): it failed, or its verdict differed
    from ``decided_by_torch``'s on random trees of 39 and 84 nodes (blocks of 64 and 128) with tokens from 3 ids,
    so that paths are accepted to every depth."""
    generator = torch.Generator().manual_seed(0)
    for tree in (full_tree([3, 3, 3]), full_tree([4, 4, 4])):
        tensors = tree_tensors(tree, device)
        for _ in range(cases):
            tokens = torch.randint(0, 3, (tree.size,), generator=generator).to(device)
            chosen = torch.randint(0, 3, (1 + tree.size,), generator=generator).to(device)
            try:
                got = decided_by_kernel(tensors, tokens, chosen)
            except Exception as error:  # noqa: BLE001 - a kernel that fails on a GPU it never ran on must not stop decoding
                return f"failed ({error!r})"
            if not torch.equal(got, expected := decided_by_torch(tensors, tokens, chosen)):
                return f"decided {got.tolist()} where the torch operations decided {expected.tolist()}"
    return None


@dataclass(frozen=True)
class QueuedWalk:
    """A verdict queued on the device behind its pass: ``packed`` [3 + 2 depth k] float64 there (last accepted row,
    bonus, group there, then the drafts' ids and probabilities), read back by ``read`` in one copy."""

    tree: DraftTree
    packed: torch.Tensor
    drafts_shape: tuple[int, int] | None  # (depth, k) of the drafts; None: no groups
    drafts_dtype: torch.dtype

    def read(self) -> tuple[Verification, tuple[torch.Tensor, torch.Tensor] | None]:
        """The verdict and the drafts, tokens and probabilities [depth, k] on the host (None where the last accepted
        node has no group): the one wait for the device a pass."""
        packed = self.packed.cpu()
        row, bonus, group = int(packed[0]), int(packed[1]), int(packed[2])
        node = row - 1 if row else ROOT
        verdict = Verification(tuple(self.tree.ancestors(node)) if row else (), bonus, node)
        if self.drafts_shape is None or group < 0:
            return verdict, None
        count = self.drafts_shape[0] * self.drafts_shape[1]
        return verdict, (packed[3:3 + count].long().view(self.drafts_shape),
                         packed[3 + count:].to(self.drafts_dtype).view(self.drafts_shape))


def queue_walk(tree: DraftTree, tokens: tuple[int, ...] | torch.Tensor, verified: torch.Tensor,
               every: torch.Tensor | None, k: int, sampling: Sampling, noise: RowNoise | None,
               decider: Decider | None = None, ahead: AheadNoise | None = None) -> QueuedWalk:
    """Queue the verdict on a pass's candidates (``tree`` with ``tokens``: N ids, or [N] long on the logits' device;
    verified [1 + N, V] logits) and the ``k`` drafts a depth of the mask group anchored on the last accepted node (every
    [G, depth, V] every group's logits; None: no groups; raced with ``ahead``'s vectors where given), judged on the
    logits' device by ``decider`` (None: ``default_decider``), without waiting for it: ids as float64 (exact), read
    back by ``QueuedWalk.read``."""
    device = verified.device
    tensors = tree_tensors(tree, device)
    chosen = chosen_tokens(verified, sampling, noise)
    ids = torch.as_tensor(tokens, dtype=torch.long, device=device)  # a tensor there already: no copy
    decided = (decider or default_decider(device))(tensors, ids, chosen)  # [3]: last accepted row, bonus, group there
    parts = [decided.double()]
    if every is not None:
        drafting = every.index_select(0, decided[2:].clamp(min=0))[0]  # [depth, V], read on the device
        vectors = raced_vectors(ahead, 0, tree.depth + every.shape[1], every.shape[-1])  # every position they may draft
        if vectors is not None:  # the rows past the bonus, whose offset is the last accepted row's depth
            bonus = torch.cat([tensors.depth.new_zeros(1), tensors.depth]).index_select(0, decided[:1]).long()
            vectors = vectors.to(device).index_select(0, bonus + torch.arange(every.shape[1], device=device))
        probs, drafts = draft_choice(drafting, k, sampling, vectors)
        parts += [drafts.flatten().double(), probs.flatten().double()]
    return QueuedWalk(tree, torch.cat(parts), None if every is None else (every.shape[1], k),
                      every.dtype if every is not None else torch.float32)
