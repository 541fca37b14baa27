"""How a pass runs on this device: one frozen object, made when a model is loaded (build.py).

A ``Runtime`` holds the model and the ``Forward`` that runs its rows over a KV cache, and says what was
chosen and why: the device, the dtype (and why ``--dtype auto`` took it), which forward runs, the kernel
plan of its linears, and the row-invariance probe's result. Everything that runs a pass (our AR loop,
BiTA's passes, the probe, the dtype choice's timing, the pass-cost table) goes through its methods, so
nothing above it asks which forward or which cache it has.

The kinds of forward (a new way of running a pass is a new kind, not a flag):

- ``LeanLlama`` ("lean", lean_llama.py): the Llama family on a CPU, over a pooled static KV cache;
- ``PaddedLean`` ("lean+graphs", padded.py): the same at padded row buckets replayed as CUDA graphs;
- ``TransformersForward`` ("transformers+exact" with our attention, else "transformers";
  transformers_forward.py): transformers' own forward over a DynamicCache.

``key`` names what the runtime's measurements depend on (no timings, no prose: the pass-cost table is
keyed by it); ``describe()`` says it for people.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Protocol

import torch
from torch import nn

from .device import machine_key, output_logits
from .kernel_plan import BLOCK_PATHS, NATIVE_PATHS, KernelPlan
from .kernels import stock_kernels
from .token_rows import TokenRows, rows_of
from .transformers_forward import Prompts, TransformersForward


class Cache(Protocol):
    """A KV cache a forward appends a pass's rows to: ``base`` prompt slots, then the context."""

    base: int

    def get_seq_length(self) -> int: ...

    def crop(self, tokens_to_remove: int) -> None: ...

    def keep(self, start: int, rows: list[int]) -> None: ...


class Forward(Protocol):
    """One way of running rows through the frozen model over its own kind of cache."""

    kind: str  # a stable name: part of the runtime's key
    exact_rows: bool  # a pass's token rows attend by exact_attention (row-invariant by construction)
    buckets: tuple[int, ...]  # the row counts passes run padded to (CUDA graphs); () where a pass runs its rows
    logit_rows: int  # the LM head runs on this many rows at a time, padded (row-invariant logits); 0: as given
    logit_head: Callable[[torch.Tensor], torch.Tensor] | None  # the LM head its passes' rows take (None: the model's)
    token_rows: bool  # its forward takes TokenRows (embedded inside its pass); else Runtime.run embeds them first

    def describe(self) -> str: ...

    def new_cache(self, prompts: Prompts = (), rows: int = 0) -> Cache: ...

    def release(self, cache: Cache) -> None: ...

    def fastest(self) -> Forward:
        """This forward at its fastest shapes (itself, unless row invariance costs it speed)."""

    def forward(self, cache: Cache, embeds: torch.Tensor | TokenRows, positions: torch.Tensor,
                allowed: torch.Tensor, ordinary: int) -> torch.Tensor:
        """embeds [R, H] (TokenRows only where ``token_rows``) at positions [R], appended to ``cache``, seeing
        allowed [R, cached + R] bool; the first ``ordinary`` rows are tokens, the rest mask rows. Returns last hidden
        states [R, H]."""


@dataclass(frozen=True)
class Invariance:
    """The row-invariance probe's outcome (invariance.py): rows compared, rows whose logits differed, the largest difference, and per
    pass (``"prefill"`` or the row count) the rows that differed."""

    rows: int
    differing: int
    worst: float
    by_pass: dict[str, int]

    @property
    def holds(self) -> bool:
        return self.rows > 0 and self.differing == 0

    def describe(self) -> str:
        if self.holds:
            return f"row-invariant ({self.rows} rows bitwise equal at {', '.join(self.by_pass)} rows)"
        failing = ", ".join(f"{name}: {count}" for name, count in self.by_pass.items() if count)
        return (f"not row-invariant: {self.differing} of {self.rows} rows differ from AR (worst logit "
                f"{self.worst:.2e}; by pass {failing})")


@dataclass(frozen=True)
class Runtime:
    """How ``model``'s passes run here (module docstring)."""

    model: nn.Module
    forward: Forward
    dtype_reason: str = "as loaded"  # why the weights are in their dtype (``--dtype auto``'s choice, precision.py)
    plan: KernelPlan | None = None  # the linears' paths (None: transformers' own kernels)
    invariance: Invariance | None = None  # the probe's result (None: not probed: a GPU, or not built for it)

    @cached_property
    def embeddings(self) -> nn.Module:
        """The model's input embeddings, looked up once (transformers' lookup costs ~20 us, and a pass asks for the
        device and dtype several times)."""
        return self.model.get_input_embeddings()

    @property
    def device(self) -> torch.device:
        return self.embeddings.weight.device

    @property
    def dtype(self) -> torch.dtype:
        return self.embeddings.weight.dtype

    @property
    def buckets(self) -> tuple[int, ...]:
        """The row counts passes run padded to: a pass costs its bucket's (() where it runs its own rows)."""
        return self.forward.buckets

    @property
    def quantized(self) -> bool:
        return getattr(self.model, "hf_quantizer", None) is not None

    @property
    def exact(self) -> bool:
        """Whether greedy BiTA equals greedy AR token for token: not k-bit, and either the passes were
        proved row-invariant here (any dtype: invariance.py) or the weights are fp32 (where a tree row and an
        AR row differ at most by fp32 rounding). Otherwise (bf16/fp16 with ``--kernels stock``, on a GPU, or
        where the probe failed) a near tie may flip; 8-bit bitsandbytes picks outlier columns over all of a
        pass's rows and 4-bit changes kernels with the row count: there identity is measured
        (bench/divergence.py), not claimed."""
        if self.quantized:
            return False
        return (self.invariance is not None and self.invariance.holds) or self.dtype == torch.float32

    @property
    def reads_blocks(self) -> bool:
        """Whether the layers' linears read a GGUF file's blocks (kernel_plan.BLOCK_PATHS), not de-quantised weights."""
        return self.plan is not None and self.plan.layers in BLOCK_PATHS

    @property
    def native_passes(self) -> bool:
        """Whether every product and the head of a pass run on the native kernels in the lean forward on a CPU (a
        row's bits then do not depend on the thread count: threads.py)."""
        return (self.device.type == "cpu" and self.forward.kind.startswith("lean") and self.plan is not None
                and self.plan.layers in NATIVE_PATHS and self.plan.head in NATIVE_PATHS)

    @property
    def key(self) -> str:
        """What a measurement of this runtime's passes depends on: the machine (``machine_key``), the dtype, the
        forward and the kernel plan."""
        plan = f"linears {self.plan.describe()}" if self.plan else "stock linears"
        dtype = str(self.dtype).removeprefix("torch.")
        bits = ["k-bit"] if self.quantized else []
        return "|".join([machine_key(self.device), dtype, *bits, self.forward.kind, plan])

    def describe(self) -> str:
        """For people: e.g. 'lean forward, static KV cache; linears layers packed, head packed; bfloat16: bf16
        hardware, row-invariant, faster (...); passes row-invariant (...)'."""
        parts = [self.forward.describe(), f"linears {self.plan.describe()}" if self.plan else "transformers' linears",
                 f"{str(self.dtype).removeprefix('torch.')}: {self.dtype_reason}"]
        if self.invariance is not None:
            parts.append(f"passes {self.invariance.describe()}")
        return "; ".join(parts)

    def new_cache(self, prompts: Prompts = (), rows: int = 0) -> Cache:
        """An empty cache holding ``prompts`` in its first P slots, with room for ``rows`` slots past them
        (where the forward reserves room: a pooled buffer records its graphs here). ``release`` it after."""
        return self.forward.new_cache(prompts, rows)

    def release(self, cache: Cache) -> None:
        """A request is done with ``cache``: a pooled one goes back for the next request to reuse."""
        self.forward.release(cache)

    def run(self, cache: Cache, embeds: torch.Tensor | TokenRows, positions: torch.Tensor, allowed: torch.Tensor,
            ordinary: int | None = None) -> torch.Tensor:
        """Rows embeds [R, H] (or given by id: TokenRows) at ``positions`` [R] through the frozen model, appended
        to ``cache``; ``allowed`` [R, cached + R] bool: the slots each row sees (the cache's ``base`` prompt slots,
        the context at positions 0, 1, ..., then the pass's rows); the first ``ordinary`` rows (None: all) are
        tokens, the rest mask rows. Returns last hidden states [R, H]."""
        if isinstance(embeds, TokenRows) and not self.forward.token_rows:
            embeds = embeds.embedded(self.embeddings)
        return self.forward.forward(cache, embeds, positions, allowed, rows_of(embeds) if ordinary is None
                                    else ordinary)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """The LM head on rows hidden [..., H] -> float logits [..., V]."""
        rows, head = self.forward.logit_rows, self.forward.logit_head
        if not rows:
            return output_logits(self.model, hidden, head)
        flat = hidden.reshape(-1, hidden.shape[-1])
        padded = torch.nn.functional.pad(flat, (0, 0, 0, -len(flat) % rows))
        chunks = [output_logits(self.model, padded[first:first + rows], head) for first in range(0, len(padded), rows)]
        logits = chunks[0] if len(chunks) == 1 else torch.cat(chunks)  # a decoding pass's: one chunk, no copy
        return logits[:len(flat)].view(*hidden.shape[:-1], -1)

    def fastest(self) -> Runtime:
        """This runtime at its fastest shapes, unprobed: our AR loop's speed baseline where row invariance costs
        an AR pass speed (padded.py), else itself."""
        fastest = self.forward.fastest()
        return self if fastest is self.forward else replace(self, forward=fastest, invariance=None)

    @contextmanager
    def stock(self) -> Iterator[nn.Module]:
        """The model on transformers' own kernels and attention inside the block (HF ``generate`` as users
        run it)."""
        with stock_kernels(self.model) as model:
            yield model


RUNTIME_ATTRIBUTE = "_bita_runtime"  # where a loaded model keeps its runtime


def register(runtime: Runtime) -> Runtime:
    """Make ``runtime`` the one ``runtime_of`` gives for its model (a model loaded by ``bita.load_model``). The
    model holds it: the two go together when the model is dropped (a registry keyed by the model would keep
    every model it ever saw, since the runtime holds its model)."""
    runtime.model.__dict__[RUNTIME_ATTRIBUTE] = runtime
    return runtime


def runtime_of(model: nn.Module) -> Runtime:
    """The runtime ``model`` was loaded with, or for a model loaded elsewhere transformers' forward as it is
    (BiTA inside ``model.generate``: bita/hf.py)."""
    return model.__dict__.get(RUNTIME_ATTRIBUTE) or Runtime(model, TransformersForward(model, exact=False))
