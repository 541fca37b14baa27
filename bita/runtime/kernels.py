"""Our CPU kernels on a transformers model: each frozen linear on the path its kernel plan chose for this
machine (kernel_plan.py), and attention ours (hf_attention.py).

``F.linear`` on a handful of rows can cost much more than on one (measured on a 2-vCPU AMD EPYC with
AVX2: a 4-row pass 1.87x a 1-row one, stock), and which alternative helps depends on the CPU: there
oneDNN-prepacked weights made the product nearly flat in rows; on an Intel Xeon with AVX-512 they slowed
the 1-row pass by a third. So nothing is assumed: ``apply_kernels`` takes the plan measured on this
machine (cached) and every linear runs its plan's path, whatever the pass's row count.

``apply_kernels`` gives each plain ``nn.Linear`` instance a ``PlannedForward`` as its ``forward`` (module
types, parameters and state dicts stay untouched, so HF ``generate``, our AR loop and BiTA all run on it)
and selects hf_attention.py's attention; ``stock_kernels`` restores both for a while on the same model.
Gradients never go through a planned path: a call that needs autograd takes ``F.linear`` on the original
weight, so training computes what it did on stock modules. The lean forward (lean_llama.py) reads the
plan from the runtime, not from these modules.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import BitaError
from . import native
from .hf_attention import our_attention, use_exact_attention
from .blocks import blocks_of
from .kernel_plan import (
    BLOCK_PATHS,
    BLOCKS_Q8,
    STOCK,
    KernelPlan,
    PlannedLinear,
    Product,
    cached_plan,
    measure_plan,
    offered_paths,
    products_of,
)
from .lean_llama import fused_groups, fused_product, fused_shape, lean_unsupported

KERNELS = ("auto", "stock")
WEIGHTS = ("auto", "dense", "blocks", "blocks-q8")
BLOCK_WEIGHTS = ("blocks", "blocks-q8")  # the --weights that read a GGUF's blocks wherever the kernels can
WEIGHTS_HELP = ("a GGUF model's linears: auto (read from the file's blocks by the native kernels where that is "
                "measured faster here, once: Q4_0, Q4_1 and Q8_0 against float activations; with --dtype auto also "
                "Q5_0, Q4_K, Q5_K and Q6_K against activations quantised to 8 bits a block, llama.cpp's arithmetic, "
                "where more than 15 %% faster), blocks (from the blocks wherever held in those types), blocks-q8 "
                "(the blocks against 8-bit activations, whatever the dtype), dense (de-quantised to the dtype, as "
                "transformers loads them)")
NATIVE_FOLDER = "native"  # beside the kernel plans: native.py's library, built once per machine
KERNELS_HELP = ("auto: on a CPU in float32 or bfloat16, every linear runs the one kernel path measured fastest "
                "on this machine (measured once, cached), attention is ours (verification rows row-invariant), "
                "and Llama-family models run a lean forward over a static KV cache (on a GPU: replayed as CUDA "
                "graphs); stock: transformers' own code and kernels")


class PlannedForward:
    """An ``nn.Linear``'s forward on its planned path: x [..., in] -> [..., out]; ``F.linear`` on the
    original weight where autograd needs it, and off the CPU. The path's copy of the weight is made at the
    first call that runs it: a model whose passes run the lean forward (its own fused copies) never makes
    one, so it holds each weight once beside the copy its forward reads."""

    def __init__(self, module: nn.Linear, path: str):
        self.module, self.path, self.planned = module, path, None

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        weight = self.module.weight
        if x.device.type != "cpu" or (torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad)):
            if weight.is_meta:
                raise BitaError("this model's linears are held in GGUF blocks alone, which do not take gradients: "
                                "load it with weights='dense' (--weights dense) to train")
            return F.linear(x, weight, self.module.bias)
        if self.planned is None:
            self.planned = PlannedLinear(*products_of([self.module])[0], self.path)
        return self.planned(x)


def _packable(module: nn.Module) -> bool:
    """Plain ``nn.Linear`` (not a subclass such as a bitsandbytes layer) with a CPU float weight (or held in GGUF blocks
    alone: a meta weight)."""
    if type(module) is not nn.Linear or module.weight.dtype not in (torch.float32, torch.bfloat16):
        return False
    return module.weight.device.type == "cpu" or module.weight.is_meta and blocks_of(module) is not None


def apply_kernels(model: nn.Module, kernels: str = "auto", plan_file: Path | None = None,
                  plan: KernelPlan | None = None, weights: str = "auto",
                  eight_bit: bool = False) -> tuple[KernelPlan | None, bool]:
    """Install the plan's paths on ``model``'s linears and our attention; return the plan (None: nothing
    installed, transformers' own kernels run) and whether the attention is now ours (it replaces "sdpa"
    and "eager" only).

    ``auto`` applies to plain ``nn.Linear`` layers on a CPU in float32 (or bfloat16); it is a no-op on
    CUDA, for other dtypes and for quantised layers. The plan: ``plan`` as given (tests), else read from
    or measured into the JSON table ``plan_file`` (None: measured, not kept). ``stock`` changes nothing.
    ``weights`` "blocks": linears held in GGUF blocks (runtime/blocks.py) choose among the blocks paths alone,
    "blocks-q8": BLOCKS_Q8 alone. BLOCKS_Q8, whose 8-bit activations change the arithmetic, is offered otherwise only
    where ``eight_bit`` (``--dtype auto``: the arithmetic is the measurement's to choose). A linear whose path reads its
    blocks drops its dense weight (a meta tensor keeps its shape), unless the input embedding shares it. The weights
    must stay frozen afterwards: the transposed and packed copies are not updated."""
    if kernels not in KERNELS:
        raise BitaError(f"unknown kernels {kernels!r}: choose {' or '.join(KERNELS)}")
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    linears = [m for m in model.modules() if _packable(m)]
    if kernels == STOCK or not linears:
        return None, False
    head = head if head in linears else None
    if plan is None:
        in_layers = [m for m in linears if m is not head]
        layers = run_products(model, in_layers, shapes_only=True)  # what the plan's key reads: no weight copied
        head_product = products_of([head])[0] if head is not None else None
        paths = offered_paths(products_of(in_layers[:1] or [head])[0][0],  # the weight, carrying its blocks
                              plan_file.parent / NATIVE_FOLDER if plan_file else None)
        paths = allowed_paths(paths, weights, eight_bit, bool(layers) and all(blocks_of(w) for w, _ in layers))
        timed = lambda: run_products(model, in_layers)  # noqa: E731 - the products as passes run them, to time
        plan = cached_plan(plan_file, layers, head_product, paths, timed) if plan_file \
            else measure_plan(timed(), head_product, paths)
    chosen = {module: plan.head if module is head else plan.layers for module in linears}
    drop_dense(model, [module for module, path in chosen.items() if path in BLOCK_PATHS])
    for module, path in chosen.items():
        module.forward = PlannedForward(module, path)
    use_exact_attention(model, True)
    return plan, our_attention(model)


def block_paths(weights: str, eight_bit: bool) -> tuple[str, ...]:
    """The blocks paths a plan may take for ``weights`` (apply_kernels'): BLOCKS_Q8 alone for "blocks-q8"; else
    BLOCKS_Q8, whose 8-bit activations change the arithmetic, beside the others only where ``eight_bit``."""
    if weights == "blocks-q8":
        return (BLOCKS_Q8,)
    return BLOCK_PATHS if eight_bit else tuple(path for path in BLOCK_PATHS if path != BLOCKS_Q8)


def allowed_paths(offered: tuple[str, ...], weights: str, eight_bit: bool, all_blocks: bool) -> tuple[str, ...]:
    """Of the paths ``offered`` here, those a plan may choose for ``weights``: the allowed ``block_paths``, and where
    ``weights`` is "blocks" or "blocks-q8" and every layer's product is held in blocks (``all_blocks``) no other
    (BitaError where "blocks-q8" is asked for and BLOCKS_Q8 not offered)."""
    if weights == "blocks-q8" and BLOCKS_Q8 not in offered:
        raise BitaError("--weights blocks-q8 reads a GGUF's blocks against 8-bit activations: the kernel "
                        "(native_blocks_q8.c) does not read this model's layers on this CPU")
    blocks, only_blocks = block_paths(weights, eight_bit), weights in BLOCK_WEIGHTS and all_blocks
    return tuple(path for path in offered if path in blocks or path not in BLOCK_PATHS and not only_blocks)


def read_by(module: nn.Linear, paths: tuple[str, ...]) -> bool:
    """Whether one of the blocks ``paths`` reads ``module``'s GGUF blocks on this CPU (native.reads)."""
    weight = products_of([module])[0][0]
    return any(native.reads(path, weight) for path in paths)


def drop_dense(model: nn.Module, modules: list[nn.Linear]) -> None:
    """Each of ``modules`` held in GGUF blocks (``blocks_of``) drops its dense weight for a meta tensor of its shape,
    unless the model's input embedding shares it: its blocks are its weights from now on."""
    embedding = model.get_input_embeddings().weight if hasattr(model, "get_input_embeddings") else None
    for module in modules:
        if blocks_of(module) is not None and module.weight is not embedding and not module.weight.is_meta:
            module.weight = nn.Parameter(torch.empty(module.weight.shape, dtype=module.weight.dtype, device="meta"),
                                         requires_grad=False)


def run_products(model: nn.Module, linears: list[nn.Linear], shapes_only: bool = False) -> list[Product]:
    """The products ``model``'s passes run over ``linears`` (its layers' plain linears): the lean forward's fused
    ones (``fused_product``: the modules' weights become views of them) where it runs the model, else each
    linear's own; ``shapes_only``: the fused ones as meta tensors of their shapes (``fused_shape``), nothing copied."""
    if lean_unsupported(model) is not None:
        return products_of(linears)
    groups = [group for group in fused_groups(model) if all(module in linears for module in group)]
    return [(fused_shape if shapes_only else fused_product)(group) for group in groups]


@contextmanager
def stock_kernels(model: nn.Module) -> Iterator[nn.Module]:
    """Run ``model`` on transformers' kernels and attention inside the block (HF ``generate`` as users run it)."""
    swapped = [m for m in model.modules() if isinstance(vars(m).get("forward"), PlannedForward)
               and not m.weight.is_meta]  # a linear held in blocks alone keeps its blocks path
    forwards = [vars(m).pop("forward") for m in swapped]
    ours = our_attention(model)
    use_exact_attention(model, False)
    try:
        yield model
    finally:
        for module, forward in zip(swapped, forwards):
            module.forward = forward
        if ours:
            use_exact_attention(model, True)
