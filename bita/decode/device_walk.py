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
- the bonus is ``chosen`` at that row, and the next drafts are the top-k of the mask group anchored there.

``walk_on_device`` returns the last accepted row, the bonus and the drafts in one copy; the accepted path is
then read off the tree on the host. Tested against the walk in Python, greedy and sampled (tests/decode).
Sampled, every row is warped here (a batched sort over the vocabulary) where the walk in Python warps only the
rows it reaches: cheap on a GPU, not on a CPU, which keeps the walk in Python (``on_device``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import torch

from ..drafts.tree import ROOT, DraftTree
from .sampling import Sampling, target_probs
from .verify import RowNoise, Verification


def on_device(device: torch.device) -> bool:
    """Whether passes on ``device`` are judged by ``walk_on_device``: on a GPU, where each copy back waits for
    the device; on a CPU the walk in Python is cheaper (it warps only the rows it reaches)."""
    return device.type == "cuda"


@dataclass(frozen=True)
class TreeTensors:
    """A draft tree of N nodes as tensors on one device.

    parent_row: [N] long, the verified row of each node's parent (0: the root's row, 1 + p: node p's).
    depth: [N] long, each node's depth (1 below the root).
    ancestry: [N, N] bool, ancestry[i, j]: node j is node i or one of its ancestors.
    earlier_sibling: [N, N] bool, earlier_sibling[i, j]: node j shares node i's parent and comes before it in
        rank order (then node index).
    group: [1 + N] long, per verified row the index of the mask group anchored there (layout.group_of), -1
        where none is.
    """

    parent_row: torch.Tensor
    depth: torch.Tensor
    ancestry: torch.Tensor
    earlier_sibling: torch.Tensor
    group: torch.Tensor


@lru_cache(maxsize=256)
def tree_tensors(tree: DraftTree, device: torch.device) -> TreeTensors:
    """``tree`` as TreeTensors on ``device`` (cached: a static tree's are made once)."""
    size = tree.size
    ancestry = torch.zeros(size, size, dtype=torch.bool)
    for index in range(size):
        ancestry[index, tree.ancestors(index)] = True
    order = {child: place for children in tree.children.values() for place, child in enumerate(children)}
    parents = [node.parent for node in tree.nodes]
    earlier = torch.tensor([[parents[i] == parents[j] and order[j] < order[i] for j in range(size)]
                            for i in range(size)], dtype=torch.bool).view(size, size)
    anchors = {anchor: group for group, anchor in enumerate(tree.group_anchors)}
    group = torch.tensor([anchors.get(row - 1 if row else ROOT, -1) for row in range(1 + size)])
    parent_row = torch.tensor([parent + 1 for parent in parents], dtype=torch.long)
    depth = torch.tensor([node.depth for node in tree.nodes], dtype=torch.long)
    return TreeTensors(*(t.to(device) for t in (parent_row, depth, ancestry, earlier, group)))


def chosen_tokens(verified: torch.Tensor, sampling: Sampling, noise: RowNoise | None) -> torch.Tensor:
    """verified [1 + N, V] logits -> [1 + N] long: each row's argmax, or its race winner with ``noise``'s vector
    for the row (bita/decode/sampling.py: what AR draws at that row's position)."""
    if sampling.greedy:
        return verified.argmax(-1)
    probs = target_probs(verified, sampling)
    vectors = torch.stack([noise(row, probs.shape[-1]).to(probs.device) for row in range(probs.shape[0])])
    return torch.argmax(probs / vectors, -1)


def last_accepted_row(tensors: TreeTensors, tokens: torch.Tensor, chosen: torch.Tensor) -> torch.Tensor:
    """The verified row of the last accepted node (0: none, the root's), a 0-d long tensor; tokens [N] long the
    nodes' candidates, chosen [1 + N] long each row's choice."""
    if tokens.numel() == 0:
        return torch.zeros((), dtype=torch.long, device=chosen.device)
    matches = tokens == chosen[tensors.parent_row]
    taken = matches & ~(tensors.earlier_sibling & matches[None]).any(-1)
    accepted = ~(tensors.ancestry & ~taken[None]).any(-1)
    depth = torch.where(accepted, tensors.depth, 0)
    return torch.where(depth.max() > 0, 1 + depth.argmax(), 0)


def walk_on_device(tree: DraftTree, tokens: tuple[int, ...], verified: torch.Tensor, every: torch.Tensor | None,
                   k: int, sampling: Sampling, noise: RowNoise | None
                   ) -> tuple[Verification, tuple[torch.Tensor, torch.Tensor] | None]:
    """The verdict on a pass's candidates (``tree`` with ``tokens``, verified [1 + N, V] logits) and the top-``k``
    drafts, tokens and probabilities [depth, k] on the host, of the mask group anchored on the last accepted node
    (every [G, depth, V] every group's logits; None: no groups; the drafts None where that node has no group),
    judged on the logits' device and brought back in one copy (ids as float64: exact)."""
    device = verified.device
    tensors = tree_tensors(tree, device)
    chosen = chosen_tokens(verified, sampling, noise)
    last = last_accepted_row(tensors, torch.tensor(tokens, dtype=torch.long, device=device), chosen)
    parts = [last[None].double(), chosen[last][None].double()]
    if every is not None:
        group = tensors.group[last]
        top = torch.softmax(every[group.clamp(min=0)], dim=-1).topk(k, dim=-1)  # [depth, k]
        parts += [group[None].double(), top.indices.flatten().double(), top.values.flatten().double()]
    packed = torch.cat(parts).cpu()
    row, bonus = int(packed[0]), int(packed[1])
    node = row - 1 if row else ROOT
    verdict = Verification(tuple(tree.ancestors(node)) if row else (), bonus, node)
    if every is None or int(packed[2]) < 0:
        return verdict, None
    count = every.shape[1] * k
    return verdict, (packed[3:3 + count].long().view(-1, k), packed[3 + count:].to(every.dtype).view(-1, k))
