"""Row-invariant attention: a row's output depends only on its query and its visible keys, never on
the other rows of the pass nor on where its keys sit in the cache.

Greedy BiTA equals AR exactly when each verification row of a tree pass computes bit for bit what the
same row computes in a one-row AR pass. SDPA does not: a call with one query row takes another path
than a call with several, and masked slots (the adapter's prompt slots, a sibling's slot) change how
the keys are split into blocks. This attention fixes the order of every reduction by the row's own
*logical* key sequence (its visible slots in order: the context, then its path in the tree):

- the sequence is cut into chunks of ``CHUNK`` keys at fixed logical offsets 0, C, 2C, ...; a chunk
  is always C wide, its masked entries exactly zero;
- scores, ``exp`` and each chunk's sums run in float32 on tensors whose last dimension is C, and the
  matrix products on row counts padded to a multiple of ``ROW_MULTIPLE`` (matrix kernels give a row
  the same result whatever the row count only there: docs/method.md);
- the chunks' partial sums are added in logical order, one after the other (``cumsum``).

The keys a row shares with the others (the context, contiguous in the cache from slot ``base``) are
scored by one product for all rows; a row whose sequence continues with keys outside that run (a
tree node's ancestors) has the chunks holding them gathered for it alone. An AR row and a tree row at
the same position see the same sequence, so they run the same arithmetic on the same numbers.

``exact_layout`` is computed once per pass (from the pass's ``allowed`` mask) and serves every layer.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

CHUNK = 64  # keys per chunk: a multiple of every CPU's float32 vector width (exp runs vectorised throughout)
ROW_MULTIPLE = 4  # matrix products run on a multiple of this many query rows


def _padded(count: int, multiple: int) -> int:
    return -(-count // multiple) * multiple


@dataclass(frozen=True)
class ExactLayout:
    """Where each exact row's logical keys are, for one pass (shared by every layer).

    rows: [E] which of the pass's rows are exact; others: [R'] the rest (they attend with SDPA).
    base: the cache slot of logical key 0 (the first slot after the adapter's prompt slots).
    shared_chunks: chunks of the shared run [base, base + shared_chunks * CHUNK) scored for all rows.
    shared_visible: [E_pad, shared_chunks * CHUNK] bool, which shared-run keys a row takes from the shared
        product (False for padding rows' keys past the first, and for a row's own chunks below).
    own_rows: [X] indices (into the E exact rows) of rows with keys outside the shared run.
    own_first_chunk: [X] long, the first of the ``own_chunks`` chunks each of them gathers for itself.
    own_slots: [X, own_chunks * CHUNK] long, the cache slot of each key of those chunks.
    own_visible: [X, own_chunks * CHUNK] bool.
    """

    rows: torch.Tensor
    others: torch.Tensor
    base: int
    shared_chunks: int
    shared_visible: torch.Tensor
    own_rows: torch.Tensor
    own_first_chunk: torch.Tensor
    own_slots: torch.Tensor
    own_visible: torch.Tensor

    @property
    def own_chunks(self) -> int:
        return self.own_slots.shape[1] // CHUNK

    @property
    def total_chunks(self) -> int:
        """Chunks in the longest logical sequence."""
        own_end = int((self.own_first_chunk + self.own_chunks).max()) if len(self.own_rows) else 0
        return max(self.shared_chunks, own_end)

    @property
    def region_end(self) -> int:
        """The last cache slot (exclusive) the shared product reads: the buffer needs this many."""
        return self.base + self.shared_chunks * CHUNK


def exact_layout(allowed: torch.Tensor, rows: torch.Tensor, base: int) -> ExactLayout:
    """The layout of ``rows`` [E] of a pass whose rows see ``allowed`` [R, K] cache slots: each row's
    visible slots from ``base`` on, in slot order, are its logical keys; every exact row sees ``base``."""
    visible = allowed[rows, base:].cpu()  # [E, K - base]
    if len(rows) and not bool(visible[:, 0].all()):
        raise ValueError("an exact row must see the first context slot")
    run = visible.int().cumprod(-1).sum(-1)  # [E] length of each row's contiguous run from base
    total = visible.sum(-1)
    shared_chunks = max(1, -(-int(run.max()) // CHUNK)) if len(rows) else 1
    width = shared_chunks * CHUNK
    padded_rows = _padded(len(rows), ROW_MULTIPLE)
    offsets = torch.arange(width)
    shared_visible = torch.zeros(padded_rows, width, dtype=torch.bool)
    shared_visible[:len(rows)] = offsets[None] < run[:, None]
    shared_visible[len(rows):, 0] = True  # a padding row sees one key: finite, never read
    own = (total > run).nonzero().flatten()
    first_chunk = run[own] // CHUNK
    own_chunks = int(max(-(-int(total[r]) // CHUNK) - int(f) for r, f in zip(own, first_chunk))) if len(own) else 1
    own_slots = torch.full((len(own), own_chunks * CHUNK), base, dtype=torch.long)
    own_visible = torch.zeros(len(own), own_chunks * CHUNK, dtype=torch.bool)
    for index, (row, chunk) in enumerate(zip(own.tolist(), first_chunk.tolist())):
        slots = visible[row].nonzero().flatten() + base  # [total] logical order = slot order
        start = chunk * CHUNK
        taken = slots[start:start + own_chunks * CHUNK]
        own_slots[index, :len(taken)] = taken
        own_visible[index, :len(taken)] = True
        shared_visible[row, start:] = False  # these chunks come from the row's own product
    others = torch.ones(allowed.shape[0], dtype=torch.bool)
    others[rows] = False
    return ExactLayout(rows, others.nonzero().flatten(), base, shared_chunks, shared_visible, own, first_chunk, own_slots, own_visible)


def _chunk_sums(scores: torch.Tensor, visible: torch.Tensor, row_max: torch.Tensor,
                values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per chunk, sum of exp(score - max) and that times the values.

    scores: [B, M, n * C] float (M query rows of each batch entry), visible: broadcastable to scores,
    row_max: [B, M, 1], values: [B, n, C, D] float. Returns ([B, M, n] weights, [B, n, M, D] outputs)."""
    weights = torch.exp(scores.masked_fill(~visible, float("-inf")) - row_max)  # masked: exactly 0
    batch, rows, width = weights.shape
    chunks = weights.view(batch, rows, width // CHUNK, CHUNK)
    return chunks.sum(-1), torch.matmul(chunks.transpose(1, 2), values)


def exact_attention(query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
                    layout: ExactLayout) -> torch.Tensor:
    """Attention of the exact rows.

    query: [E, heads, D] (the exact rows' queries, rotated); keys, values: [kv_heads, capacity, D] a layer's
    whole cache buffers (with at least ``layout.region_end`` slots), heads a multiple of kv_heads.
    Returns [E, heads, D] in the query's dtype."""
    rows, heads, dim = query.shape
    kv_heads = keys.shape[0]
    groups = heads // kv_heads
    padded_rows = layout.shared_visible.shape[0]
    scale = dim ** -0.5
    q = torch.zeros(padded_rows, heads, dim, dtype=torch.float32, device=query.device)
    q[:rows] = query.float() * scale
    q = q.view(padded_rows, kv_heads, groups, dim)
    end, chunks = layout.region_end, layout.shared_chunks
    shared_k = keys[:, layout.base:end].float()  # [kv, W, D]
    shared_v = values[:, layout.base:end].float().view(kv_heads, chunks, CHUNK, dim)
    # shared product: rows x groups folded into M = padded_rows * groups (a multiple of ROW_MULTIPLE)
    q_shared = q.permute(1, 0, 2, 3).reshape(kv_heads, padded_rows * groups, dim)
    scores = torch.matmul(q_shared, shared_k.transpose(1, 2))  # [kv, E_pad*G, W]
    visible = layout.shared_visible.to(query.device).repeat_interleave(groups, 0)[None]  # [1, E_pad*G, W]
    row_max = scores.masked_fill(~visible, float("-inf")).amax(-1, keepdim=True)  # [kv, E_pad*G, 1]

    own = layout.own_rows.to(query.device)
    if len(own):
        own_groups = _padded(groups, ROW_MULTIPLE)
        slots = layout.own_slots.to(query.device)  # [X, A*C]
        own_k = keys[:, slots].float().permute(1, 0, 2, 3)  # [X, kv, A*C, D]
        own_v = values[:, slots].float().permute(1, 0, 2, 3)
        q_own = torch.zeros(len(own), kv_heads, own_groups, dim, dtype=torch.float32, device=query.device)
        q_own[:, :, :groups] = q[own]
        own_scores = torch.matmul(q_own, own_k.transpose(2, 3))  # [X, kv, G_pad, A*C]
        own_visible = layout.own_visible.to(query.device)[:, None, None]  # [X, 1, 1, A*C]
        own_max = own_scores.masked_fill(~own_visible, float("-inf")).amax(-1, keepdim=True)[:, :, :groups]
        shared_max = row_max.view(kv_heads, padded_rows, groups, 1)
        joint = torch.maximum(shared_max[:, own], own_max.permute(1, 0, 2, 3))  # [kv, X, G, 1]
        shared_max[:, own] = joint
        own_row_max = torch.zeros(len(own), kv_heads, own_groups, 1, device=query.device)
        own_row_max[:, :, :groups] = joint.permute(1, 0, 2, 3)
        own_weights, own_out = _chunk_sums(own_scores.view(len(own) * kv_heads, own_groups, -1), own_visible.view(
            len(own), 1, -1).repeat_interleave(kv_heads, 0), own_row_max.view(len(own) * kv_heads, own_groups, 1),
            own_v.reshape(len(own) * kv_heads, layout.own_chunks, CHUNK, dim))
    weights, out = _chunk_sums(scores, visible, row_max, shared_v)  # [kv, M, n], [kv, n, M, D]

    total = layout.total_chunks
    chunk_weights = torch.zeros(kv_heads, padded_rows, groups, total, device=query.device)
    chunk_out = torch.zeros(kv_heads, padded_rows, groups, total, dim, device=query.device)
    chunk_weights[..., :chunks] = weights.view(kv_heads, padded_rows, groups, chunks)
    chunk_out[..., :chunks, :] = out.view(kv_heads, chunks, padded_rows, groups, dim).permute(0, 2, 3, 1, 4)
    if len(own):
        span = layout.own_first_chunk.to(query.device)[:, None] + torch.arange(layout.own_chunks,
                                                                             device=query.device)  # [X, A]
        own_weights = own_weights.view(len(own), kv_heads, own_groups, -1)[:, :, :groups].permute(1, 0, 2, 3)
        own_out = own_out.view(len(own), kv_heads, -1, own_groups, dim)[:, :, :, :groups].permute(1, 0, 3, 2, 4)
        # the shared product left these chunks at exactly zero for these rows: adding is placing
        index = span[None, :, None].expand(kv_heads, -1, groups, -1)
        chunk_weights[:, own] = chunk_weights[:, own].scatter_add(-1, index, own_weights)
        chunk_out[:, own] = chunk_out[:, own].scatter_add(
            -2, index[..., None].expand(-1, -1, -1, -1, dim), own_out)
    # chunks added one after the other in logical order (trailing empty chunks add exact zeros)
    total_weight = chunk_weights.cumsum(-1)[..., -1:]
    total_out = chunk_out.cumsum(-2)[..., -1, :]
    attended = total_out / total_weight  # [kv, E_pad, G, D]
    return attended.permute(1, 0, 2, 3).reshape(padded_rows, heads, dim)[:rows].to(query.dtype)
