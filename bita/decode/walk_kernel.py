"""The tree verdict of device_walk.py in one Triton kernel: which node is the last accepted, the bonus token and
the mask group anchored there, from the rows' choices, in one launch instead of the ~20 small torch operations
of ``device_walk.decided_by_torch`` (each a launch of a few microseconds of host time on a GPU: issue 47's host
work a step).

One program holds the whole tree (its N nodes padded to a power of two): node i *matches* when its token is the
choice at its parent's row, is *taken* when it matches and no earlier sibling does, is *accepted* when it and
every ancestor are taken; the deepest accepted node is the last (the root's row 0 when none is). The same rules,
in the same order, as ``decided_by_torch``; tested against it under Triton's interpreter
(tests/decode/test_device_walk.py).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit(do_not_specialize=["nodes"])  # one compiled kernel a block size, whatever the node count
def _decide(chosen_ptr, tokens_ptr, parent_ptr, depth_ptr, ancestry_ptr, earlier_ptr, group_ptr, out_ptr, nodes,
            BLOCK: tl.constexpr):
    node, other = tl.arange(0, BLOCK), tl.arange(0, BLOCK)
    inside = node < nodes
    pair = node[:, None] * nodes + other[None, :]
    both = inside[:, None] & (other < nodes)[None, :]
    parent = tl.load(parent_ptr + node, mask=inside, other=0)
    matches = inside & (tl.load(tokens_ptr + node, mask=inside, other=0) == tl.load(chosen_ptr + parent))  # [B]
    earlier = tl.load(earlier_ptr + pair, mask=both, other=0) != 0  # [B, B]: other is an earlier sibling of node
    blocked = tl.max((earlier & matches[None, :]).to(tl.int32), 1)
    taken = (matches & (blocked == 0)).to(tl.int32)
    ancestry = tl.load(ancestry_ptr + pair, mask=both, other=0) != 0  # [B, B]: other is node or its ancestor
    missing = tl.max((ancestry & (taken[None, :] == 0)).to(tl.int32), 1)
    depth = tl.where(inside & (missing == 0), tl.load(depth_ptr + node, mask=inside, other=0), 0).to(tl.int32)
    row = tl.where(tl.max(depth, 0) > 0, tl.argmax(depth, 0) + 1, 0)
    tl.store(out_ptr, row)
    tl.store(out_ptr + 1, tl.load(chosen_ptr + row))
    tl.store(out_ptr + 2, tl.load(group_ptr + row))


BLOCKS = (16, 32, 64, 128, 256)  # the padded tree sizes compiled, all at a device's first verdict
_compiled: set[torch.device] = set()


def decide(parent_row: torch.Tensor, depth: torch.Tensor, ancestry: torch.Tensor, earlier_sibling: torch.Tensor,
           group: torch.Tensor, tokens: torch.Tensor, chosen: torch.Tensor) -> torch.Tensor:
    """(last accepted row, bonus, group there) as [3] long on the tensors' device. parent_row, depth [N] int32;
    ancestry, earlier_sibling [N, N] int32 (1: true), contiguous; group [1 + N] int32 (-1: none); tokens [N] long
    the candidates, N >= 1; chosen [1 + N] long, each row's choice. The first call on a device compiles the kernel
    for every block size in ``BLOCKS`` (a trie's size changes from pass to pass: no compile lands in a later, timed,
    pass of up to 256 candidates; a larger trie compiles its block size at its first pass)."""
    if chosen.device not in _compiled:
        _compiled.add(chosen.device)
        for block in BLOCKS:
            _launch(parent_row[:1], depth[:1], ancestry[:1, :1], earlier_sibling[:1, :1], group[:2], tokens[:1],
                    chosen[:2], block)
    return _launch(parent_row, depth, ancestry, earlier_sibling, group, tokens, chosen,
                   max(BLOCKS[0], triton.next_power_of_2(tokens.numel())))


def _launch(parent_row, depth, ancestry, earlier_sibling, group, tokens, chosen, block: int) -> torch.Tensor:
    out = torch.empty(3, dtype=torch.long, device=chosen.device)
    _decide[(1,)](chosen, tokens, parent_row, depth, ancestry, earlier_sibling, group, out, tokens.numel(),
                  BLOCK=block)
    return out
