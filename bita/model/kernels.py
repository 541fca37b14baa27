"""CPU kernels for passes of a few rows: each frozen linear runs the path measured fastest on this
machine for the pass's row count (kernel_plan.py), and attention is ours (hf_attention.py).

``F.linear`` on a handful of rows can cost much more than on one (measured on a 2-vCPU AMD EPYC
with AVX2: a 4-row pass 1.87x a 1-row one, stock), and which alternative helps depends on the
CPU: there oneDNN-prepacked weights made the product nearly flat in rows at every row count; on
an Intel Xeon with AVX-512 they slowed the 1-row pass by a third, and a plain matmul on a weight
transposed once won at 4-16 rows. So nothing is assumed: ``apply_kernels`` takes the plan
measured on this machine (cached) and each linear dispatches on its input's row count.

transformers' attention is swapped for hf_attention.py's: the same results, grouped key/values read
in place, and our passes' verification rows attending row-invariantly.

``apply_kernels`` swaps the ``forward`` of each plain ``nn.Linear`` instance (module types,
parameters and state dicts stay untouched, so HF ``generate``, our AR loop and BiTA all run
on it) and selects hf_attention.py's attention; ``stock_kernels`` restores both
for a while on the same model. Gradients never go through a planned path: a call that needs
autograd takes ``F.linear`` on the original weight, so training computes what it did on stock
modules.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import MethodType

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import BitaError
from .hf_attention import set_row_invariant
from .kernel_plan import (
    PACKED,
    PATHS,
    STOCK,
    TRANSPOSED,
    KernelPlan,
    bucket_of,
    cached_plan,
    measure_plan,
    pack,
    row_floor,
    run_path,
)

KERNELS = ("auto", "stock")
KERNELS_HELP = ("auto: each linear runs the kernel measured fastest on this machine for the pass's row count "
                "(CPU float32/bfloat16; measured once, cached), and Llama-family models run a lean forward over a "
                "static KV cache on CPU; stock: transformers' own code and kernels")
MEASURED = "measured"  # STOCK ("stock") is both a kernels choice and a path: kernel_plan.py


def _planned_forward(self: nn.Linear, x: torch.Tensor) -> torch.Tensor:
    """x [..., in] -> [..., out] by the path planned for its row count; ``F.linear`` on the
    original weight for autograd and for a non-CPU input."""
    if x.device.type != "cpu" or (torch.is_grad_enabled() and (x.requires_grad or self.weight.requires_grad)):
        return F.linear(x, self.weight, self.bias)
    path = self.bita_paths[bucket_of(x.numel() // x.shape[-1])]
    return run_path(path, x, self.weight, self.bias, self.bita_transposed_weight, self.bita_packed_weight,
                    self.bita_row_floor)


def _packable(module: nn.Module) -> bool:
    """Plain ``nn.Linear`` (not a subclass such as a bitsandbytes layer) with a CPU float weight."""
    return type(module) is nn.Linear and module.weight.device.type == "cpu" and module.weight.dtype in (
        torch.float32, torch.bfloat16)


def apply_kernels(model: nn.Module, kernels: str = "auto", plan_file: Path | None = None,
                  plan: KernelPlan | None = None) -> str:
    """Install the measured paths on ``model``'s linears; return what runs: STOCK, or MEASURED and
    the plan (e.g. 'measured (layers: 1 stock, 2-64 transposed, 128 stock; head: packed)').

    ``auto`` applies to plain ``nn.Linear`` layers on CPU in float32 (or bfloat16) and swaps SDPA or eager
    attention for hf_attention.py's; it is a no-op on CUDA, for other dtypes and for
    quantised layers. The plan: ``plan`` as given (tests), else read from or measured into the JSON
    file ``plan_file`` (None: measured, not kept). ``stock`` changes nothing. The weights must stay
    frozen afterwards: the transposed and packed copies are not updated.
    """
    if kernels not in KERNELS:
        raise BitaError(f"unknown kernels {kernels!r}: choose {' or '.join(KERNELS)}")
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    linears = [m for m in model.modules() if _packable(m)]
    if kernels == STOCK or not linears:
        return STOCK
    head = head if head in linears else None
    layers = [m for m in linears if m is not head]
    if plan is None:
        paths = PATHS if torch.backends.mkldnn.is_available() and pack(linears[0].weight) is not None else \
            (STOCK, TRANSPOSED)
        plan = cached_plan(plan_file, layers, head, paths) if plan_file else measure_plan(layers, head, paths)
    for module in linears:
        module.bita_paths = plan.head if module is head else plan.layers
        module.bita_transposed_weight = module.weight.detach().t().contiguous() if TRANSPOSED in module.bita_paths \
            else None
        module.bita_packed_weight = pack(module.weight) if PACKED in module.bita_paths else None
        module.bita_row_floor = row_floor(module.bita_paths[0], module.weight, module.bias,
                                          module.bita_transposed_weight, module.bita_packed_weight)
        module.forward = MethodType(_planned_forward, module)
    set_row_invariant(model, True)
    return f"{MEASURED} ({plan.describe()})"


def kernels_of(model: nn.Module) -> str:
    """MEASURED when ``apply_kernels`` installed its paths on ``model``, else STOCK."""
    return MEASURED if any("bita_paths" in vars(m) for m in model.modules()) else STOCK


@contextmanager
def stock_kernels(model: nn.Module) -> Iterator[nn.Module]:
    """Run ``model`` on the stock kernels inside the block (HF ``generate`` as users run it today)."""
    swapped = [m for m in model.modules() if "forward" in vars(m) and "bita_paths" in vars(m)]
    forwards = [vars(m).pop("forward") for m in swapped]
    set_row_invariant(model, False)
    try:
        yield model
    finally:
        for module, forward in zip(swapped, forwards):
            module.forward = forward
        if swapped:
            set_row_invariant(model, True)
