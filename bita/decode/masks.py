"""Attention visibility and position ids for BiTA passes, as pure tensor functions.

Key columns of every pass are laid out as ``[P prompt slots | C cached tokens | R new rows]``.
Rules (docs/method.md): ordinary rows never see the prompt slots nor any mask row; a
mask row sees the prompt slots, the ordinary tokens up to and including its anchor, and the
earlier masks of its own group.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import torch

from ..drafts.tree import ROOT, DraftTree


@dataclass(frozen=True)
class PassLayout:
    """The R new rows of one decoding pass, in this order:

    - ``chain`` ordinary rows, causal among themselves; the last one is the root
      (``chain`` is the prompt length in the first pass, 1 afterwards);
    - one row per tree node (``tree.nodes`` order);
    - one group of ``n_masks`` mask rows per anchor in ``tree.group_anchors``.
    """

    tree: DraftTree
    n_masks: int
    chain: int
    is_mask: torch.Tensor  # [R] bool
    position_offsets: torch.Tensor  # [R] long, position minus the root's position
    visible: torch.Tensor  # [R, R] bool, row i may attend new row j
    group_rows: torch.Tensor  # [G, n_masks] long, rows of each mask group, G = len(group_anchors)

    @property
    def rows(self) -> int:
        return self.is_mask.shape[0]

    @property
    def root_row(self) -> int:
        return self.chain - 1

    def node_row(self, index: int) -> int:
        """Row of tree node ``index`` (ROOT gives the root row)."""
        return self.root_row if index == ROOT else self.chain + index

    def group_of(self, anchor: int) -> int:
        """Index into ``group_rows`` of the group anchored at node ``anchor`` (or ROOT)."""
        return self.tree.group_anchors.index(anchor)


def layout_rows(tree: DraftTree, n_masks: int, chain: int = 1) -> int:
    """Rows of ``decode_layout(tree, n_masks, chain)``, without building it."""
    return chain + tree.size + len(tree.group_anchors) * n_masks


@lru_cache(maxsize=256)
@torch.inference_mode(False)  # cached: must stay usable by autograd even if first built while decoding
def decode_layout(tree: DraftTree, n_masks: int, chain: int = 1) -> PassLayout:
    """Build the layout of a pass feeding ``chain`` ordinary rows, ``tree`` and its mask groups. The chain rows are
    causal among themselves and every later row sees them all; which later rows each later row sees is gathered in
    Python lists and written in one indexing (a trie merged with chains is a new shape many passes, and a tensor
    write a row costs more than the lists)."""
    n_nodes = tree.size
    n_groups = len(tree.group_anchors)
    rows = layout_rows(tree, n_masks, chain)
    first_mask = chain + n_nodes
    sees: list[list[int]] = []  # per row after the chain, the rows after the chain it sees
    offsets = list(range(1 - chain, 1))
    for index, node in enumerate(tree.nodes):
        sees.append((sees[node.parent] if node.parent != ROOT else []) + [chain + index])
        offsets.append(node.depth)
    for group, anchor in enumerate(tree.group_anchors):
        context = sees[anchor] if anchor != ROOT else []
        anchor_depth = 0 if anchor == ROOT else tree.nodes[anchor].depth
        group_start = first_mask + group * n_masks
        for i in range(n_masks):
            sees.append(context + list(range(group_start, group_start + i + 1)))
            offsets.append(anchor_depth + 1 + i)
    visible = torch.zeros(rows, rows, dtype=torch.bool)
    visible[:chain, :chain] = torch.ones(chain, chain, dtype=torch.bool).tril()
    visible[chain:, :chain] = True
    seen_rows = [chain + row for row, columns in enumerate(sees) for _ in columns]
    visible[seen_rows, [column for columns in sees for column in columns]] = True
    is_mask = torch.arange(rows) >= first_mask
    group_rows = torch.arange(first_mask, rows).view(n_groups, n_masks)
    return PassLayout(tree, n_masks, chain, is_mask, torch.tensor(offsets, dtype=torch.long), visible, group_rows)


def allowed_keys(layout: PassLayout, n_prompt: int, n_cached: int) -> torch.Tensor:
    """[R, n_prompt + n_cached + R] bool (on the host): which key columns each new row may attend. Written
    through numpy (half the time of torch's ops: it is made before every pass)."""
    allowed = np.empty((layout.rows, n_prompt + n_cached + layout.rows), dtype=bool)
    allowed[:, :n_prompt] = layout.is_mask.numpy()[:, None]
    allowed[:, n_prompt:n_prompt + n_cached] = True
    allowed[:, n_prompt + n_cached:] = layout.visible.numpy()
    return torch.from_numpy(allowed)


@dataclass(frozen=True)
class PackedGroups:
    """Mask rows for training: G groups of n masks per sequence of T ordinary tokens.

    Row g*n + i is mask i of group g, anchored at ordinary position ``anchors[b, g]``.
    Unused groups have anchor -1: they see only the prompt slots and their own group.
    """

    visible_ordinary: torch.Tensor  # [B, G*n, T] bool, mask row may attend ordinary token
    visible_masks: torch.Tensor  # [G*n, G*n] bool, same group and not later in it
    positions: torch.Tensor  # [B, G*n] long, anchor + 1 + i
    target_index: torch.Tensor  # [B, G*n] long, anchor + 2 + i: the ordinary position predicted


def packed_groups(anchors: torch.Tensor, n_masks: int, seq_len: int) -> PackedGroups:
    """Training visibility for many mask groups per sequence. anchors: [B, G] long."""
    step = torch.arange(n_masks, device=anchors.device)
    row_anchor = anchors.repeat_interleave(n_masks, dim=1)  # [B, G*n]
    positions = (anchors[:, :, None] + 1 + step).flatten(1)
    visible_ordinary = torch.arange(seq_len, device=anchors.device)[None, None, :] <= row_anchor[:, :, None]
    rows = anchors.shape[1] * n_masks
    group = torch.arange(rows, device=anchors.device) // n_masks
    inside = torch.arange(rows, device=anchors.device) % n_masks
    visible_masks = (group[:, None] == group[None, :]) & (inside[None, :] <= inside[:, None])
    return PackedGroups(visible_ordinary, visible_masks, positions.clamp(min=0), positions + 1)
