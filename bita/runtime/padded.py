"""Passes of fixed shapes for CUDA graphs: rows padded to a row bucket, inputs in preallocated buffers.

A CUDA graph replays the kernels it recorded on the tensors it recorded, so a pass it can replay
must have the same shapes and addresses every time. Here a pass of R rows runs as one of
B = ``ROW_BUCKETS``' next size up (a pass of more rows than the last bucket, a long prompt's prefill, as
successive passes of the last bucket's rows, each a replay): its token ids (or embeddings), positions, mask and cache
slots are copied into buffers [B, ...] made once per (cache buffer, B); the padding rows see only their own slot; the
cache is written at a slot tensor (``StaticKV.write_at``) and attention reads the cache's whole
buffer [capacity] under the mask, so nothing depends on the cache's length. Attention folds the
query groups into rows (lean_llama.py ``fold_groups``), so SDPA can take a fused backend.

Graph lifetime: the cache buffers come from the lean forward's pool, so a buffer, and the graphs
recorded on it, serve request after request; ``new_cache`` reserves the request's room and records
every bucket's graph on a buffer that lacks them *before* the request's first timed pass, so no
recording lands in a pass's seconds, and a buffer records each bucket once (again only if a
request outgrows it, at least doubling it). Concurrent requests (the app's race) take one buffer
each. ``capture`` is the recording seam: CUDA graphs on a CUDA device; the tests pass one that
counts. Without graphs (a CPU) the same buffers run eagerly, which is how this path is tested on a
CPU (tests/runtime/test_padded.py).

Host work per pass: a pass's positions, cache slots, token ids and mask are written on the host into one byte
buffer (pinned on CUDA) laid out as the device buffer the graph reads them from, and sent in one
non-blocking copy (``PassBuffers.fill``); the pass looks the ids up in the model's embeddings itself and takes
its mask rows from a table that holds the adapter's mask embeddings (copied when they change), so the host
launches nothing else before the replay (rows given as embeddings, the probes', are one copy into the table).
The next pass of the bucket waits for that copy (an event recorded after it) before it rewrites the host
buffer: passes run back to back without a readback between them (an AR loop that reads its tokens at the end,
the invariance probe) would otherwise overwrite a mask the GPU has not read yet, and their rows would attend
wrongly (on an H100, by whole logits: benchmarks/results/h100/2026-11-26-gpu-check).

A runtime on a CUDA device runs this (build.py) once ``compare_with_transformers`` compared a pass of every
bucket with transformers' forward, row by row; on a CPU the unpadded lean forward is faster (it attends only
the valid slots) and runs instead. How a padded pass computes its rows is a ``PassWay``, one of four named
ways (``FASTEST``, ``TRITON_LAYERS``, ``FIXED_TILES``, ``one_shape``): two row-invariant, two at the fastest
shapes; a new way of running a pass is a new way, not a flag.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .kernel_plan import TRITON, PlannedLinear
from .lean_llama import Attend, FusedLayerOps, LayerOps, LeanLlama, Store, TorchOps
from .static_kv import StaticKV
from .token_rows import TokenRows, rows_of
from .transformers_forward import TransformersForward

ROW_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128)  # a pass of R rows runs as the first bucket >= R
INVARIANT_ROWS = 64  # the rows of every row-invariant pass, AR or tree (a larger tree runs as two)


@dataclass(frozen=True)
class PassWay:
    """How a padded pass computes its rows (``PaddedLean``): one of the named ways below."""

    name: str  # the forward's kind ends with it ("" for the fastest shapes with transformers' operations)
    invariant_rows: int = 0  # one shape: every pass (AR or tree) as passes of this many rows, the LM head too
    triton_linears: bool = False  # fixed tiles: the linears and the LM head on triton_linear.py's kernel
    layer_kernels: bool = False  # a layer's elementwise work in triton_layer.py's kernels (not torch's operations)

    @property
    def exact_rows(self) -> bool:
        """Row-invariant: every row attends in logical order and its products do not depend on the pass's rows."""
        return bool(self.invariant_rows or self.triton_linears)


FASTEST = PassWay("")  # SDPA over the whole buffer, cuBLAS at each row bucket, transformers' operations
TRITON_LAYERS = PassWay("triton-layers", layer_kernels=True)  # the same with Triton's layer kernels
FIXED_TILES = PassWay("triton-linears", triton_linears=True, layer_kernels=True)  # row-invariant at row buckets


def one_shape(rows: int = INVARIANT_ROWS) -> PassWay:
    """Row-invariant at one shape: every pass as passes of ``rows`` rows (cuBLAS at one shape)."""
    return PassWay(f"invariant{rows}", invariant_rows=rows, layer_kernels=True)


def bucket_of(rows: int, buckets: tuple[int, ...] = ROW_BUCKETS) -> int:
    """The rows of the bucket a pass of ``rows`` rows runs as (the last bucket's for longer passes, which
    run as several)."""
    return buckets[min(bisect_left(buckets, rows), len(buckets) - 1)]


@dataclass(frozen=True)
class Recorded:
    """A recorded pass: ``replay()`` runs it again on the same buffers, writing ``output``."""

    replay: Callable[[], None]
    output: torch.Tensor


def cuda_graph(run: Callable[[], torch.Tensor]) -> Recorded:
    """Record ``run`` (a pass on fixed buffers, returning its output) as a CUDA graph, after two warm-up
    runs on a side stream, as torch.cuda.graphs' documentation prescribes.

    The graph owns every byte it reads, the cuBLAS workspace included: the workspaces are dropped just
    before the recording, so the one its matrix products get is allocated inside the recording, from the
    graph's private memory pool (kept while the graph lives), and dropped again after it, so no later
    work runs on that memory. Otherwise the graph bakes in the address of a workspace that the process
    shares and that others free: ``torch.compile``'s CUDA graphs (mode "reduce-overhead", which HF
    ``generate`` uses with a static cache) clear every cuBLAS workspace around each of their recordings
    and empty the allocator's cache, and a replay of ours then reads freed memory (CUDA error: an illegal
    memory access; issue 47). torch's own CUDA-graph trees record this way (``clear_cublas_manager``)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(2):
            run()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    torch._C._cuda_clearCublasWorkspaces()
    try:
        with torch.cuda.graph(graph):
            output = run()
    finally:
        torch._C._cuda_clearCublasWorkspaces()
    return Recorded(graph.replay, output)


class Staged(NamedTuple):
    """A padded pass's inputs as it reads them: views of one byte buffer (``staged_views``), B rows over K slots."""

    positions: torch.Tensor  # [B] long
    slots: torch.Tensor  # [B] long: the cache slot each row writes
    ids: torch.Tensor  # [B] long: a token row's id (0 for the others)
    table_rows: torch.Tensor  # [B] long: the row of ``PassBuffers.table`` a row given as embeddings takes
    from_table: torch.Tensor  # [B] bool: the row is given as embeddings (a mask row, padding), not by id
    allowed: torch.Tensor  # [B, K] bool


def staged_views(buffer: torch.Tensor, bucket: int, capacity: int) -> Staged:
    """A ``Staged`` of views of one byte buffer [``staged_bytes(B, K)``] uint8: the four long vectors, then
    ``from_table``, then ``allowed``."""
    longs = buffer[:32 * bucket].view(torch.long)
    return Staged(*(longs[index * bucket:(index + 1) * bucket] for index in range(4)),
                  buffer[32 * bucket:33 * bucket].view(torch.bool),
                  buffer[33 * bucket:].view(torch.bool).view(bucket, capacity))


def staged_bytes(bucket: int, capacity: int) -> int:
    return 33 * bucket + bucket * capacity


def host_array(tensor: torch.Tensor) -> np.ndarray:
    """A tensor's values as a numpy array (a view of a CPU tensor's memory)."""
    return (tensor if tensor.device.type == "cpu" else tensor.cpu()).numpy()


@dataclass
class PassBuffers:
    """The fixed inputs and output of one padded pass shape: B rows over a cache of capacity K.
    ``staged`` [staged_bytes(B, K)] uint8 on the device holds what the pass reads (``staged_views``: positions,
    slots, the token rows' ids, the other rows' table rows, allowed); ``host`` is its mirror on the host, filled by a
    pass through ``host_arrays``, numpy views of it laid out the same way (numpy's writes cost a fraction of
    torch's dispatch, and a pass writes ~15 of them before its replay). ``table`` holds the rows given as
    embeddings: a decoding pass's mask embeddings (copied again only when they are other tensors), or every row
    of a pass given as embeddings; its last row stays zeros, the padding rows' input."""

    table: torch.Tensor  # [B + 1, H]
    staged: torch.Tensor  # device bytes, ``staged_views``
    host: torch.Tensor  # the same layout on the host (pinned on CUDA)
    capacity: int  # K
    hidden: torch.Tensor | None = None  # [B, H], the output (the recorded pass's, once recorded)
    recorded: Recorded | None = None
    sent: torch.cuda.Event | None = None  # on CUDA: recorded after the last copy of ``host`` to ``staged``
    table_holds: torch.Tensor | None = None  # the mask embeddings ``table`` begins with (None: other rows)
    host_arrays: Staged = field(init=False, repr=False)  # numpy arrays in fact: ``host``'s views

    @classmethod
    def make(cls, bucket: int, capacity: int, hidden_size: int, dtype: torch.dtype,
             device: torch.device) -> PassBuffers:
        size = staged_bytes(bucket, capacity)
        return cls(torch.zeros(bucket + 1, hidden_size, dtype=dtype, device=device),
                   torch.zeros(size, dtype=torch.uint8, device=device),
                   torch.zeros(size, dtype=torch.uint8, pin_memory=device.type == "cuda"), capacity)

    @property
    def bucket(self) -> int:
        return self.table.shape[0] - 1

    def __post_init__(self):
        self.host_arrays = Staged(*(view.numpy() for view in staged_views(self.host, self.bucket, self.capacity)))

    def views(self) -> Staged:
        """What the pass reads, on the device."""
        return staged_views(self.staged, self.bucket, self.capacity)

    def inputs(self, embedding: torch.Tensor) -> torch.Tensor:
        """The pass's input rows [B, H], inside the pass: a token row's id looked up in ``embedding`` [V, H] (the
        model's input embeddings), every other row its table row: two gathers and a select, row by row."""
        staged = self.views()
        return torch.where(staged.from_table[:, None], F.embedding(staged.table_rows, self.table),
                           F.embedding(staged.ids, embedding))

    def fill(self, length: int, rows: torch.Tensor | TokenRows, positions: torch.Tensor,
             allowed: torch.Tensor) -> None:
        """Stage a pass of R rows (embeddings [R, H], or TokenRows) whose cache slots start at ``length`` and send
        it: padding rows get zeros, position 0 and their own slot only (a row that sees nothing would make
        NaNs, and NaN times a zero weight is NaN)."""
        count, bucket = rows_of(rows), self.bucket
        if self.sent is not None:  # the last pass's copy may still be reading the host buffer
            self.sent.synchronize()
        host = self.host_arrays
        host.positions[:count] = host_array(positions)
        host.positions[count:] = 0
        host.slots[:] = np.arange(length, length + bucket)
        host.allowed[:] = False
        host.allowed[:count, :allowed.shape[1]] = host_array(allowed)
        padding = np.arange(count, bucket)
        host.allowed[padding, length + padding] = True
        given, period = self._given_rows(rows, count)
        host.from_table[:] = True
        host.from_table[:given] = False
        host.ids[given:] = 0
        host.table_rows[given:count] = np.arange(count - given) % period
        host.table_rows[count:] = bucket
        self.staged.copy_(self.host, non_blocking=True)
        if self.staged.is_cuda:
            self.sent = self.sent or torch.cuda.Event()  # one event a buffer, recorded again each pass
            self.sent.record()

    def _given_rows(self, rows: torch.Tensor | TokenRows, count: int) -> tuple[int, int]:
        """Stage the token rows' ids and put the other rows' embeddings in the table (on the device): TokenRows' mask
        embeddings (copied only where the table holds others), or every row of embeddings [R, H]. (The token rows,
        the table rows the other rows take in turn.)"""
        if not isinstance(rows, TokenRows):
            self.table[:count] = rows
            self.table_holds = None
            return 0, max(count, 1)
        given = len(rows.ids)
        self.host_arrays.ids[:given] = host_array(rows.ids)
        if not rows.groups:
            return given, 1
        if self.table_holds is not rows.masks:
            self.table[:rows.masks.shape[0]] = rows.masks
            self.table_holds = rows.masks
        return given, rows.masks.shape[0]


class PaddedLean:
    """The lean forward (a LeanLlama) run at padded row buckets the ``way`` a ``PassWay`` names; ``graphs``: record
    each bucket's pass with ``capture`` (CUDA graphs by default) and replay it.

    Row-invariant passes, two ways (``exact_rows``): every row attends in logical order (logical_attention.py) and
    a layer's elementwise work runs one Triton kernel each (triton_layer.py), and the matrix products give a row
    the same bits in any pass by
    - ``one_shape``: every pass runs as passes of ``invariant_rows`` rows, the LM head on that many rows too
      (``logit_rows``): cuBLAS at one shape for every pass, and an AR pass costs a tree pass's;
    - ``FIXED_TILES``: the linears and the LM head (``logit_head``) run triton_linear.py's kernel, whose sums do
      not depend on the row count, so passes keep their row buckets.
    Otherwise (``FASTEST``, ``TRITON_LAYERS``) rows attend by SDPA over the whole buffer at ``ROW_BUCKETS``'
    shapes, with cuBLAS: the fastest shapes for an AR pass, with Triton's layer kernels in ``TRITON_LAYERS`` (an
    H100's AR pass 1.9 ms, not 3.3 with transformers' ~25 elementwise operations a layer), else transformers'
    torch operations (what a GPU without Triton runs)."""

    def __init__(self, lean: LeanLlama, way: PassWay = FASTEST, graphs: bool = True,
                 capture: Callable[[Callable[[], torch.Tensor]], Recorded] = cuda_graph):
        self.lean, self.way, self.graphs, self.capture = lean, way, graphs, capture
        self.retired_tables: list[torch.Tensor] = []  # rotary tables that recorded graphs may still read
        self.exact_rows = way.exact_rows
        self.buckets = (way.invariant_rows,) if way.invariant_rows else ROW_BUCKETS
        self.logit_rows, self.logit_head = way.invariant_rows, None
        self.ops: LayerOps | FusedLayerOps = TorchOps
        self.layers = lean.layers
        self.token_rows = type(lean.input_embeddings) is nn.Embedding  # a plain lookup: done inside the pass
        if way.layer_kernels:  # Triton: only where a runtime asks for its kernels
            from . import triton_layer
            self.ops = triton_layer
        if self.exact_rows:
            from . import logical_attention
            self.logical = logical_attention
        if way.triton_linears:  # the same weights, on triton_linear.py's fixed tiles
            self.layers = [tuple(PlannedLinear(part.weight, part.bias, TRITON) if isinstance(part, PlannedLinear)
                                 else part for part in layer) for layer in lean.layers]
            head = lean.output_embeddings
            self.logit_head = PlannedLinear(head.weight.detach(), head.bias, TRITON)

    @property
    def kind(self) -> str:
        return "+".join(["lean", "graphs" if self.graphs else "padded", *([self.way.name] if self.way.name else [])])

    def describe(self) -> str:
        way = self.way
        shape = f"every pass at {way.invariant_rows} rows" if way.invariant_rows else "per row bucket"
        invariance = (", Triton's fixed-tile linears" if way.triton_linears else "") + (
            ", attention in logical order (row-invariant)" if self.exact_rows else
            ", Triton's layer kernels" if way.layer_kernels else "")
        return f"lean forward, static KV cache, {'CUDA graphs' if self.graphs else 'eager passes'} {shape}{invariance}"

    def fastest(self) -> PaddedLean:
        """This forward at its fastest shapes (``ROW_BUCKETS``, SDPA, transformers' linears, Triton's layer kernels):
        our AR loop's speed baseline where invariance costs an AR pass speed. It shares the lean forward and its
        cache pool."""
        return PaddedLean(self.lean, TRITON_LAYERS, self.graphs, self.capture) if self.exact_rows else self

    def grow_rotary(self, positions: int) -> None:
        """The lean forward's rotary table for ``positions`` (every slot of a cache buffer), keeping the
        table it replaces alive for the graphs recorded on it."""
        if positions > self.lean.cos.shape[0]:
            self.retired_tables += [self.lean.cos, self.lean.sin]
            self.lean.grow_rotary(positions)

    def new_cache(self, prompts: list[tuple[torch.Tensor, torch.Tensor]] = (), rows: int = 0) -> StaticKV:
        """A pooled cache holding ``prompts`` with room for ``rows`` slots past them and, with graphs, every
        bucket recorded on it."""
        cache = self.lean.new_cache(prompts, rows + self.buckets[-1])  # and a padded pass past the last row
        self.grow_rotary(cache.capacity)
        if self.graphs:
            for bucket in self.buckets:
                buffers = self._buffers(cache, bucket)
                if buffers.recorded is None:
                    staged = buffers.views()
                    buffers.fill(cache.length, buffers.table[:0], staged.positions[:0], staged.allowed[:0, :0])
                    self._record(buffers, cache)
        return cache

    def release(self, cache: StaticKV) -> None:
        self.lean.release(cache)

    @torch.inference_mode()
    def forward(self, cache: StaticKV, embeds: torch.Tensor | TokenRows, positions: torch.Tensor,
                allowed: torch.Tensor, ordinary: int = 0) -> torch.Tensor:
        """As LeanLlama.forward (``ordinary`` unused: every row attends alike, in logical order or by SDPA): rows
        embeds [R, H] (or TokenRows, where ``token_rows``: looked up inside the pass) at ``positions`` [R] appended to
        ``cache``; ``allowed`` [R, length + R] bool. Returns final-norm hidden states [R, H]. More rows than the last
        bucket run as passes of its rows, one after the other (the rows of a pass see only rows before them)."""
        step, start = self.buckets[-1], cache.length
        if rows_of(embeds) <= step:  # every decoding pass: one replay, no concatenation
            return self._bucket_pass(cache, embeds, positions, allowed)
        if isinstance(embeds, TokenRows):  # a long prompt's prefill
            embeds = embeds.embedded(self.lean.input_embeddings)
        return torch.cat([self._bucket_pass(cache, embeds[first:first + step], positions[first:first + step],
                                            allowed[first:first + step, :start + first + step])
                          for first in range(0, embeds.shape[0], step)])

    def _bucket_pass(self, cache: StaticKV, embeds: torch.Tensor | TokenRows, positions: torch.Tensor,
                     allowed: torch.Tensor) -> torch.Tensor:
        """A pass of at most the last bucket's rows, padded to its bucket: [R, H]."""
        rows = rows_of(embeds)
        bucket = bucket_of(rows, self.buckets)
        cache.reserve(bucket)  # a grown buffer empties ``cache.recorded``: graphs of the old one are void
        self.grow_rotary(cache.capacity)
        buffers = self._buffers(cache, bucket)
        buffers.fill(cache.length, embeds, positions, allowed)
        if buffers.recorded is not None:
            buffers.recorded.replay()
        elif self.graphs:  # a request outgrew its buffer: recorded here, inside the pass (new_cache avoids it)
            self._record(buffers, cache)
            buffers.recorded.replay()
        else:
            buffers.hidden = self._run(buffers, cache)
        cache.advance(rows)
        return buffers.hidden[:rows].clone()

    def _buffers(self, cache: StaticKV, bucket: int) -> PassBuffers:
        """The buffers of ``bucket``'s passes on ``cache`` (made once, kept in ``cache.recorded``)."""
        key = self.kind, bucket  # forwards sharing a pool keep their own buffers on a cache
        if key not in cache.recorded:
            cache.recorded[key] = PassBuffers.make(bucket, cache.capacity, self.lean.norm.shape[0], cache.kv.dtype,
                                                   cache.kv.device)
        return cache.recorded[key]

    def _run(self, buffers: PassBuffers, cache: StaticKV) -> torch.Tensor:
        """The padded pass on the buffers: [B, H]."""
        staged = buffers.views()
        return self.lean.run_layers(buffers.inputs(self.lean.input_embeddings.weight),
                                    self._store(cache, staged.positions, staged.slots),
                                    self._attention(staged.allowed), self.ops, self.layers)

    def _store(self, cache: StaticKV, positions: torch.Tensor, slots: torch.Tensor) -> Store:
        """The pass's rotary and cache write for rows at ``positions`` [B] into ``slots`` [B]: one kernel a layer
        where the layer ops have it (triton_layer.rotate_store), else rotary and then the cache's ``write_at``."""
        lean, rotate_store = self.lean, getattr(self.ops, "rotate_store", None)
        if rotate_store is None:
            return lean.rotated_store(positions, lambda layer, k, v: cache.write_at(layer, slots, k, v), self.ops)

        def store(layer: int, projected: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
            keys, values = cache.buffers(layer)
            return rotate_store(projected, lean.heads, lean.cos, lean.sin, positions, slots, keys, values), \
                keys[None], values[None]
        return store

    def _attention(self, allowed: torch.Tensor) -> Attend:
        """How the rows of a pass under allowed [B, K] attend: in logical order (``exact_rows``; the order table
        built once, inside the pass), else SDPA with the query groups folded into rows."""
        if not self.exact_rows:
            return self.lean.sdpa(allowed, fold_groups=True)
        order, counts = self.logical.logical_order(allowed)
        return lambda layer, q, keys, values: self.logical.attend(q, keys[0], values[0], order, counts)

    def _record(self, buffers: PassBuffers, cache: StaticKV) -> None:
        """Record the padded pass with ``capture``; ``buffers.hidden`` becomes its output."""
        buffers.recorded = self.capture(lambda: self._run(buffers, cache))
        buffers.hidden = buffers.recorded.output


CLEAR_GAP = 1.0  # logits apart: transformers' top two this far apart are not a tie rounding may flip


@dataclass(frozen=True)
class Agreement:
    """How a fixed-shape forward's passes compare with transformers' forward, row by row."""

    worst_relative_l2: float  # largest ||ours - theirs|| / ||theirs|| of one row's hidden state
    median_relative_l2: float  # the rows' median of it
    top1_differs: int  # rows whose argmax logit differs where transformers' top two are CLEAR_GAP or more apart
    rows: int  # rows compared

    def within(self, tolerance: float, half: bool = False) -> bool:
        """float32: every row within ``tolerance`` and every clear argmax the same. ``half``: the median row within
        ``tolerance`` and nine clear argmaxes in ten the same: in bf16 a correct forward whose sums round otherwise
        drifts over the layers (build.py, HALF_TOLERANCE), while a broken one (a wrong rotary, a wrong mask) leaves
        every row far off (relative L2 ~1)."""
        if half:
            return self.median_relative_l2 <= tolerance and self.top1_differs <= self.rows // 10
        return self.worst_relative_l2 <= tolerance and self.top1_differs == 0


@torch.inference_mode()
def compare_with_transformers(model: nn.Module, forward: PaddedLean) -> Agreement:
    """Run a 12-token causal prefill and then one pass of every row bucket (1 .. 128 rows, past the
    cache's first 256 slots, so the buffer grows and the passes after run on the new one) through
    ``forward`` (given by id where it looks token rows up inside its pass, as decoding sends them) and through
    transformers' forward (stock attention) over its cache; compare each row's hidden state (relative L2) and,
    where transformers' top two logits are ``CLEAR_GAP`` apart, argmax."""
    embed, device = model.get_input_embeddings(), model.get_input_embeddings().weight.device
    reference = TransformersForward(model, exact=False)
    caches = forward.new_cache(), reference.new_cache()
    generator = torch.Generator().manual_seed(0)
    errors, differs, start = [], 0, 0
    head = model.get_output_embeddings()
    for rows in (12, *ROW_BUCKETS):
        ids = torch.randint(0, embed.num_embeddings, (rows,), generator=generator)
        embeds = embed(ids.to(device))
        allowed = torch.ones(rows, start + rows, dtype=torch.bool, device=device).tril(start)
        positions = torch.arange(start, start + rows, device=device)
        ours = forward.forward(caches[0], TokenRows(ids) if forward.token_rows else embeds, positions, allowed, rows)
        theirs = reference.forward(caches[1], embeds, positions, allowed, rows)
        errors.append((ours - theirs).float().norm(dim=-1) / theirs.float().norm(dim=-1).clamp(min=1e-12))
        top = head(theirs).float().topk(2)
        clear = top.values[:, 0] - top.values[:, 1] >= CLEAR_GAP
        differs += int(((head(ours).argmax(-1) != top.indices[:, 0]) & clear).sum())
        start += rows
    forward.release(caches[0])  # grown past its first size, with its graphs: the first request's buffer
    error = torch.cat(errors)
    return Agreement(float(error.max()), float(error.median()), differs, len(error))
