"""A lean forward's decoder stack in one native call a pass (native_stack.c), where every linear runs on one of the
native library's kernels (native, dot or AMX): the same kernels on the same arguments, in the same order, as
``LeanLlama.run_layers`` calls them one by one on the native path (so the same bits), without the ~300 Python calls a
pass, each with its checks, views and allocation, between which the OpenMP threads fall asleep (a one-row pass of
SmolLM2-135M after 300 cached on a 2-vCPU Xeon of family 6 model 207: 12.0 ms instead of 23.5;
benchmarks/native_stack.py). Its checks run once a pass, here."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from . import native
from .kernel_plan import PlannedLinear
from .static_kv import StaticKV

if TYPE_CHECKING:
    from .lean_llama import LeanLlama


def _address(tensor: torch.Tensor | None) -> int:
    return tensor.data_ptr() if tensor is not None else 0


class NativeStack:
    """The decoder stack of a LeanLlama ``lean`` as native_stack.c runs it: ``addresses`` [layers x 10 + 1] int64, a
    layer's norm, Q/K/V product and bias, O product and bias, norm, gate/up product and bias, down product and bias
    (a product: its weight as ``native.pack`` packed it; a bias: a float32 copy kept here, or 0), then the final
    norm's; one kernel (``kernel``: a path of ``native.KERNELS``) for every product."""

    def __init__(self, lean: LeanLlama, kernel: str):
        self.lean, self.kernel = lean, native.KERNELS[kernel].stack
        self.biases = []  # float32 copies of the biases, the C code reads them
        addresses = []
        for layer in lean.layers:  # (norm, Q/K/V, O, norm, gate/up, down)
            for part in layer:
                if isinstance(part, PlannedLinear):
                    bias = part.bias.detach().float().contiguous() if part.bias is not None else None
                    self.biases.append(bias)
                    addresses += [part.copy.data_ptr(), _address(bias)]
                else:
                    addresses.append(part.data_ptr())
        addresses.append(lean.norm.data_ptr())
        self.addresses = torch.tensor(addresses, dtype=torch.int64)
        self.intermediate = lean.layers[0][4].weight.shape[0] // 2
        self.hidden = lean.norm.shape[0]

    @classmethod
    def of(cls, lean: LeanLlama) -> NativeStack | None:
        """The stack of ``lean`` where native_stack.c can run it (None: its attention is not native, or a linear runs
        on another path or pads rows to a floor above 1, or its norms are not contiguous in the model's dtype)."""
        if not lean.native:
            return None
        linears = [part for layer in lean.layers for part in layer if isinstance(part, PlannedLinear)]
        norms = [part for layer in lean.layers for part in layer if not isinstance(part, PlannedLinear)] + [lean.norm]
        kernels = {linear.path for linear in linears}
        if len(kernels) != 1 or not all(linear.called_from_c for linear in linears):
            return None
        if any(norm.dtype != lean.dtype or not norm.is_contiguous() for norm in norms):
            return None
        return cls(lean, kernels.pop())

    def run(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, allowed: torch.Tensor,
            cache: StaticKV) -> torch.Tensor:
        """Rows x [R, hidden] with their rotary cos, sin [R, head_dim] through every layer, their keys and values
        written at the cache's slots length .. length + R - 1 (``reserve`` first; the caller advances ``length``),
        each row attending to the slots ``allowed`` [R, K] (bool, K <= capacity) marks: the final norm's output
        [R, hidden]."""
        lean, rows = self.lean, x.shape[0]
        dtype, dim = lean.dtype, lean.head_dim
        x, cos, sin, allowed = x.contiguous(), cos.contiguous(), sin.contiguous(), allowed.contiguous()
        kv = cache.kv
        if x.dtype != dtype or x.device.type != "cpu" or x.shape != (rows, self.hidden) or not rows:
            raise ValueError(f"NativeStack.run takes rows x [R >= 1, {self.hidden}] {dtype} on the CPU, not "
                             f"{native._shown(x)}")
        if cos.shape != (rows, dim) or sin.shape != cos.shape or cos.dtype != dtype or sin.dtype != dtype:
            raise ValueError(f"NativeStack.run: cos and sin must be {dtype} [{rows}, {dim}], not {native._shown(cos)} "
                             f"and {native._shown(sin)}")
        if kv.shape != (len(lean.layers), 2, lean.kv_heads, cache.capacity, dim) or kv.dtype != dtype \
                or not kv.is_contiguous() or cache.length + rows > cache.capacity:
            raise ValueError(f"NativeStack.run: the cache must hold {rows} more slots of this model's layers in "
                             f"{dtype}: {native._shown(kv)} at length {cache.length}")
        if allowed.dtype != torch.bool or allowed.dim() != 2 or allowed.shape[0] != rows \
                or allowed.shape[1] > cache.capacity:
            raise ValueError(f"NativeStack.run: allowed must be bool [{rows}, K <= {cache.capacity}], not "
                             f"{native._shown(allowed)}")
        out = torch.empty_like(x)
        failed = native._library.bita_stack(
            self.addresses.data_ptr(), len(lean.layers), dtype == torch.bfloat16, self.kernel, x.data_ptr(),
            out.data_ptr(), cos.data_ptr(), sin.data_ptr(), allowed.data_ptr(), allowed.shape[1], kv.data_ptr(),
            cache.capacity, cache.length, rows, self.hidden, lean.heads, lean.kv_heads, dim, self.intermediate,
            lean.eps, dim ** -0.5, torch.get_num_threads())
        if failed:
            raise MemoryError(f"native_stack.c could not allocate its scratch for a pass of {rows} rows")
        return out
