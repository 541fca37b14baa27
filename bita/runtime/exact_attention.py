"""Row-invariant attention: a row's output depends only on its query and its visible keys, never on
the other rows of the pass nor on where its keys sit in the cache.

Greedy BiTA equals AR exactly when each verification row of a tree pass computes bit for bit what the
same row computes in a one-row AR pass. SDPA does not: a call with one query row takes another path
than a call with several, and masked slots (the adapter's prompt slots, a sibling's slot) change how
the keys are split into blocks. This attention fixes the order of every reduction by the row's own
*logical* key sequence (its visible slots in order: the context, then its path in the tree):

- every row is scored against every key of the pass's region (the context and the pass's own slots,
  from slot ``base``) by one matrix product on row counts padded to a multiple of ``ROW_MULTIPLE``
  (matrix kernels give a row the same result whatever the row count only there: docs/method.md), and
  ``exp`` runs on that whole float32 tensor, whose last dimension is a multiple of ``CHUNK``;
- the logical sequence is cut into chunks of ``CHUNK`` keys at fixed logical offsets 0, C, 2C, ...;
  each chunk's sums (weights, and weights times values) are products with exactly C keys, masked
  entries exactly zero;
- the chunks' partial sums are added in logical order, one after the other (``cumsum``).

Where a row's logical keys are contiguous from ``base`` (the context, then a chain), its chunks are
the region's own chunks and come from one product for all rows. A row whose sequence skips slots (a
tree node whose siblings sit between its ancestors) has the chunks from its first gap on gathered
into logical order for it alone. An AR row and a tree row at the same position see the same sequence,
so they run the same arithmetic on the same numbers.

``exact_layout`` is computed once per pass (from the pass's ``allowed`` mask) and serves every layer.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

CHUNK = 64  # keys per chunk: a multiple of every CPU's float32 vector width (exp runs vectorised throughout)
ROW_MULTIPLE = 4  # matrix products run on a multiple of this many query rows


def _padded(count: int, multiple: int) -> int:
    return -(-count // multiple) * multiple


@dataclass(frozen=True)
class ExactLayout:
    """Where each exact row's logical keys are, for one pass (shared by every layer); tensors on the
    model's device. Offsets count slots from ``base``; the region is [base, base + chunks * CHUNK). The
    products' query rows are the exact rows' heads, row-major: query row e x G + g is head g of exact row e
    within a key/value head's group of G, padded to M_pad rows (a multiple of ROW_MULTIPLE).

    count: E, the exact rows: the pass's first E rows (its tokens; the rest, mask rows, attend with SDPA),
        others_allowed [1, 1, R - E, K] bool the slots the rest see.
    base: the cache slot of logical key 0 (the first slot after the adapter's prompt slots).
    groups: G, query heads per key/value head.
    chunks: the region's chunks.
    hidden: [M_pad, chunks * CHUNK] float, -inf at the region's keys a query row does not see, else 0 (a
        padding row sees key 0).
    kept: [M_pad, chunks * CHUNK] float, 0 at the keys a query row takes from its gathered chunks instead
        (from its first gathered chunk on), else 1; None where no row gathers.
    own_queries: [X x G] the query rows of the exact rows that gather chunks (X of them).
    own_offsets: [X, A * CHUNK] long, the region offset of each key of those chunks, in logical order;
        past the row's last key, the offset of its first gap (a key it does not see: weight exactly 0).
    own_query_offsets: [X x G, A * CHUNK] long, ``own_offsets`` per query row.
    """

    count: int
    others_allowed: torch.Tensor
    base: int
    groups: int
    chunks: int
    hidden: torch.Tensor
    kept: torch.Tensor | None
    own_queries: torch.Tensor
    own_offsets: torch.Tensor
    own_query_offsets: torch.Tensor

    @property
    def region_end(self) -> int:
        """The last cache slot (exclusive) the product reads: the buffer needs this many."""
        return self.base + self.chunks * CHUNK


def exact_layout(allowed: torch.Tensor, count: int, base: int, groups: int, device: torch.device | str = "cpu",
                 windowed: torch.Tensor | None = None) -> ExactLayout:
    """The layout of the first ``count`` rows of a pass whose rows see ``allowed`` [R, K] cache slots, for a
    model with ``groups`` query heads per key/value head: each row's visible slots from ``base`` on, in slot
    order, are its logical keys; every exact row sees ``base`` (its context's first token).

    ``windowed`` [R, K] bool: what a sliding-window layer's rows see of ``allowed`` (None: all of it). The
    keys a window hides keep their places in the logical sequence with weight exactly 0, so a row's
    chunks fall where they fall without the window, in an AR pass as in a tree pass."""
    visible = allowed[:count, base:].cpu()  # [E, K - base]
    shown = visible if windowed is None else windowed[:count, base:].cpu()
    if count and not bool(visible[:, 0].all()):
        raise ValueError("an exact row must see the first context slot")
    run = visible.int().cumprod(-1).sum(-1)  # [E] length of each row's contiguous run from base
    total = visible.sum(-1)
    seen = visible.any(0).nonzero()
    chunks = max(1, -(-(int(seen.max()) + 1) // CHUNK)) if len(seen) else 1
    width = chunks * CHUNK
    queries = count * groups
    padded_queries = _padded(queries, ROW_MULTIPLE)
    region = torch.zeros(padded_queries, width, dtype=torch.bool)
    region[:queries, :shown.shape[1]] = shown[:, :width].repeat_interleave(groups, 0)
    region[queries:, 0] = True  # a padding row sees one key: finite, never read
    own = (total > run).nonzero().flatten()
    first_chunk = run[own] // CHUNK
    spread = int(max(-(-int(total[r]) // CHUNK) - int(f) for r, f in zip(own, first_chunk))) if len(own) else 1
    own_offsets = run[own, None].repeat(1, spread * CHUNK)  # [X, A*C] the first gap, until filled
    gathered = torch.zeros(padded_queries, width, dtype=torch.bool)
    for index, (row, chunk) in enumerate(zip(own.tolist(), first_chunk.tolist())):
        offsets = visible[row].nonzero().flatten()[chunk * CHUNK:]  # logical order = slot order
        own_offsets[index, :len(offsets)] = offsets
        gathered[row * groups:(row + 1) * groups, chunk * CHUNK:] = True
    own_queries = (own[:, None] * groups + torch.arange(groups)).flatten()
    hidden = torch.zeros(region.shape).masked_fill_(~region, float("-inf"))
    return ExactLayout(count, allowed[count:].to(device)[None, None], base, groups, chunks, hidden.to(device),
                       (~gathered).float().to(device) if len(own) else None, own_queries.to(device),
                       own_offsets.to(device), own_offsets.repeat_interleave(groups, 0).to(device))


def _chunk_sums(weights: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per chunk, the sum of the weights and the weighted sum of the values.

    weights: [B, M, n * C] float, contiguous (M query rows of each batch entry), values: [B, n, C, D] float.
    Returns ([B, M, n] weight sums, [B, n, M, D] outputs)."""
    batch, rows, width = weights.shape
    chunks = weights.view(batch, rows, width // CHUNK, CHUNK)
    return chunks.sum(-1), torch.matmul(chunks.transpose(1, 2), values)


def _region(buffer: torch.Tensor, layout: ExactLayout) -> torch.Tensor:
    """A layer's keys or values [kv_heads, capacity, D] -> float [kv_heads, W, D] over the layout's region,
    zeros past the buffer's end (a cache that holds only its valid slots)."""
    region = buffer[:, layout.base:layout.region_end].float()
    missing = layout.region_end - layout.base - region.shape[1]
    return F.pad(region, (0, 0, 0, missing)) if missing else region


def exact_attention(query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, layout: ExactLayout,
                    scaling: float | None = None, softcap: float | None = None) -> torch.Tensor:
    """Attention of the exact rows.

    query: [E, heads, D] (the exact rows' queries, rotated); keys, values: [kv_heads, capacity, D] a layer's
    cache buffers (the region past ``capacity`` reads as zeros), heads = kv_heads x ``layout.groups``;
    ``scaling``: of the scores (None: D ** -0.5); ``softcap``: scores become tanh(s / cap) x cap (Gemma 2).
    Returns [E, heads, D] in the query's dtype."""
    rows, heads, dim = query.shape
    kv_heads, groups = keys.shape[0], layout.groups
    queries, padded_queries = rows * groups, layout.hidden.shape[0]
    q = query.new_zeros(kv_heads, padded_queries, dim, dtype=torch.float32)
    q[:, :queries] = (query.float() * (dim ** -0.5 if scaling is None else scaling)).view(
        rows, kv_heads, groups, dim).transpose(0, 1).reshape(kv_heads, queries, dim)
    region_k, region_v = _region(keys, layout), _region(values, layout)  # [kv, W, D]
    scores = torch.matmul(q, region_k.transpose(1, 2))  # [kv, M_pad, W]
    if softcap:
        scores = scores.div_(softcap).tanh_().mul_(softcap)
    scores = scores.add_(layout.hidden)
    weights = scores.sub_(scores.amax(-1, keepdim=True)).exp_()  # hidden keys exactly 0
    if layout.kept is not None:
        own_weights = weights[:, layout.own_queries].gather(  # [kv, X x G, A*C]
            -1, layout.own_query_offsets.expand(kv_heads, -1, -1))
        own_sums = _own_chunk_sums(own_weights, region_v, layout)
        weights.mul_(layout.kept)
    sums, out = _chunk_sums(weights, region_v.view(kv_heads, layout.chunks, CHUNK, dim))  # [kv, M, n], [kv, n, M, D]
    if layout.kept is not None:
        sums, out = _placed(sums, out, *own_sums, layout)
    # chunks added one after the other in logical order (trailing empty chunks add exact zeros)
    attended = out.cumsum(1)[:, -1, :queries] / sums.cumsum(-1)[:, :queries, -1:]  # [kv, E x G, D]
    return attended.view(kv_heads, rows, groups, dim).transpose(0, 1).reshape(rows, heads, dim).to(query.dtype)


def _own_chunk_sums(own_weights: torch.Tensor, region_v: torch.Tensor,
                    layout: ExactLayout) -> tuple[torch.Tensor, torch.Tensor]:
    """The gathered chunks' sums: own_weights [kv, X x G, A*C] in logical order, region_v [kv, W, D].
    Returns ([kv, X x G, A] weight sums, [kv, A, X x G, D] outputs); the products run on G padded to
    ROW_MULTIPLE rows per row and key/value head."""
    kv_heads, own_queries, width = own_weights.shape
    groups, spread, dim = layout.groups, width // CHUNK, region_v.shape[-1]
    count, padded_groups = own_queries // groups, _padded(groups, ROW_MULTIPLE)
    weights = own_weights.new_zeros(count, kv_heads, padded_groups, width)
    weights[:, :, :groups] = own_weights.view(kv_heads, count, groups, width).transpose(0, 1)
    own_v = region_v[:, layout.own_offsets].transpose(0, 1)  # [X, kv, A*C, D]
    sums, out = _chunk_sums(weights.view(count * kv_heads, padded_groups, width),
                            own_v.reshape(count * kv_heads, spread, CHUNK, dim))
    sums = sums.view(count, kv_heads, padded_groups, spread)[:, :, :groups].transpose(0, 1)
    out = out.view(count, kv_heads, spread, padded_groups, dim)[:, :, :, :groups].permute(1, 2, 0, 3, 4)
    return sums.reshape(kv_heads, own_queries, spread), out.reshape(kv_heads, spread, own_queries, dim)


def _placed(sums: torch.Tensor, out: torch.Tensor, own_sums: torch.Tensor, own_out: torch.Tensor,
            layout: ExactLayout) -> tuple[torch.Tensor, torch.Tensor]:
    """The region's chunk sums, sums [kv, M_pad, n] and out [kv, n, M_pad, D], followed by the gathered
    chunks' (``_own_chunk_sums``; zeros for the other rows). The region's sums are exactly zero from a
    gathering row's first gathered chunk on, so the chunks added in this order give the sums of its
    logical order: zeros add nothing."""
    spread = own_sums.shape[-1]
    extra_sums = sums.new_zeros(*sums.shape[:2], spread)
    extra_sums[:, layout.own_queries] = own_sums
    extra_out = out.new_zeros(out.shape[0], spread, *out.shape[2:])
    extra_out[:, :, layout.own_queries] = own_out
    return torch.cat([sums, extra_sums], -1), torch.cat([out, extra_out], 1)
