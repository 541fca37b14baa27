"""Row attention in logical order for fixed-shape passes (Triton): a row's result depends only on its
query and the keys it sees, in the order it sees them, never on the other rows of its pass nor on
where its keys sit in the cache. native_attention.c's promise on a CPU, here for a GPU.

A row's *logical* keys are the cache slots it sees, in slot order (``logical_order``): for a token
row at position p, the keys of positions 0 .. p, that is the context and then its path in the tree,
whatever prompt slots, siblings or padding rows sit between them. One program attends one row's G
query heads of one key/value head over those keys in blocks of ``BLOCK`` logical keys (block b holds
logical keys bB .. bB + B - 1; the last block's tail scores -inf, weight exactly 0), with the online
softmax (running max, running sum, running weighted values, each rescaled block by block). An AR row
and a tree row at the same position thus run the same instructions on the same numbers, block for
block, whatever else their passes hold, and give the same bits; SDPA under a mask does not (its
blocks are of slots, and which kernel runs depends on the shapes).

Everything has a fixed shape (a CUDA graph replays it): the order table is [R, K] for a pass of R rows
over a cache of K slots, built from the pass's ``allowed`` mask inside the pass; only a program's loop
count (its row's key count) varies. Products run in float32 (``input_precision="ieee"``, no TF32).

On a CPU the same kernel runs under Triton's interpreter (``TRITON_INTERPRET=1``, numpy), which is how
it is tested without a GPU (tests/runtime/test_logical_attention.py).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .triton_layer import rounded

BLOCK = 64  # logical keys a block


def logical_order(allowed: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """For allowed [R, K] bool: each row's visible slots in slot order, order [R, K] int32 (its first
    counts[r] entries; the rest 0), and counts [R] int32. Fixed shapes, no host sync: slot s of row r
    goes to column (visible slots of r before s), the hidden ones to a spare column dropped after."""
    rows, slots = allowed.shape
    column = torch.where(allowed, allowed.cumsum(-1, dtype=torch.int32) - 1, slots)  # [R, K]
    order = torch.zeros(rows, slots + 1, dtype=torch.int32, device=allowed.device)
    order.scatter_(1, column.long(), torch.arange(slots, dtype=torch.int32, device=allowed.device).expand(rows, -1))
    return order[:, :slots], allowed.sum(-1, dtype=torch.int32)


@triton.jit
def _attend(q_ptr, k_ptr, v_ptr, order_ptr, count_ptr, out_ptr, scaling,
            q_row, q_head, kv_head, kv_slot, order_row, out_row, out_head,
            GROUPS: tl.constexpr, GROUPS_PADDED: tl.constexpr, DIM: tl.constexpr, BLOCK_KEYS: tl.constexpr):
    """One program: row ``program_id(0)``, key/value head ``program_id(1)`` and its GROUPS query heads."""
    row, head = tl.program_id(0), tl.program_id(1)
    group, dim = tl.arange(0, GROUPS_PADDED), tl.arange(0, DIM)
    heads = head * GROUPS + group  # [GP] the query heads this program serves
    q = tl.load(q_ptr + row * q_row + heads[:, None] * q_head + dim[None, :], mask=(group < GROUPS)[:, None],
                other=0.0).to(tl.float32) * scaling  # [GP, D]
    count = tl.load(count_ptr + row)
    running_max = tl.full([GROUPS_PADDED], float("-inf"), tl.float32)
    running_sum = tl.zeros([GROUPS_PADDED], tl.float32)
    weighted = tl.zeros([GROUPS_PADDED, DIM], tl.float32)
    for start in range(0, count, BLOCK_KEYS):
        logical = start + tl.arange(0, BLOCK_KEYS)
        inside = logical < count
        slots = tl.load(order_ptr + row * order_row + logical, mask=inside, other=0)  # [B]
        at = head * kv_head + slots[:, None] * kv_slot + dim[None, :]  # [B, D]
        keys = tl.load(k_ptr + at).to(tl.float32)
        values = tl.load(v_ptr + at).to(tl.float32)
        scores = tl.dot(q, tl.trans(keys), input_precision="ieee")  # [GP, B]
        scores = tl.where(inside[None, :], scores, float("-inf"))
        block_max = tl.maximum(running_max, tl.max(scores, 1))
        weights = tl.exp(scores - block_max[:, None])
        rescale = tl.exp(running_max - block_max)
        running_sum = running_sum * rescale + tl.sum(weights, 1)
        weighted = weighted * rescale[:, None] + tl.dot(weights, values, input_precision="ieee")
        running_max = block_max
    attended = weighted / running_sum[:, None]
    tl.store(out_ptr + row * out_row + heads[:, None] * out_head + dim[None, :],
             rounded(attended, out_ptr.dtype.element_ty), mask=(group < GROUPS)[:, None])


def attend(query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, order: torch.Tensor, counts: torch.Tensor,
           scaling: float | None = None) -> torch.Tensor:
    """Attention of every row in logical order.

    query: [R, heads, D] (last dimension contiguous); keys, values: [kv_heads, K, D] a layer's cache buffers
    (contiguous); order [R, K] int32 and counts [R] int32 from ``logical_order``; heads = kv_heads x G;
    ``scaling`` of the scores (None: D ** -0.5). D must be a power of two. Returns [R, heads, D] in the
    query's dtype."""
    rows, heads, dim = query.shape
    kv_heads = keys.shape[0]
    groups = heads // kv_heads
    out = torch.empty(rows, heads, dim, dtype=query.dtype, device=query.device)
    _attend[(rows, kv_heads)](
        query, keys, values, order, counts, out, dim ** -0.5 if scaling is None else scaling,
        query.stride(0), query.stride(1), keys.stride(0), keys.stride(1), order.stride(0), out.stride(0),
        out.stride(1), GROUPS=groups, GROUPS_PADDED=max(16, triton.next_power_of_2(groups)), DIM=dim,
        BLOCK_KEYS=BLOCK)
    return out
