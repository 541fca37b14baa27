"""Fast kernels for passes of a few rows on CPU: linears on weights prepacked once by oneDNN,
and attention that reads grouped key/values without copying them.

``F.linear`` on a handful of rows re-packs the weight matrix on every call, so on a small
CPU a pass of 4-20 rows cost 1.5-2x a pass of one. Packing every frozen ``nn.Linear``
weight once into oneDNN's blocked layout (the kernel inductor's weight freezing uses) makes
the product nearly flat in rows. Measured on this 2-vCPU machine, one call on a weight hot
in cache (ms, 1 / 6 / 20 / 1024 rows, stock vs packed): a 1536x576 weight 0.10 / 0.28 / 0.55
/ 10.6 vs 0.12 / 0.12 / 0.38 / 12.2; the 49152x576 LM head 9.4 / 25.3 / 26.6 / 476 vs 5.0 /
8.0 / 12.2 / 423. In a real pass the weights come cold from memory and the packed kernel
wins at one row too (a whole AR pass 9 % faster than with BLAS's matrix-vector product for
the small weights); past ``PACKED_MAX_ROWS`` rows (long prompts, training batches) the stock
kernel is as fast or faster for all but the LM head.

Under a custom attention mask with more than one query row (every BiTA pass), transformers'
SDPA attention copies each layer's key/values once per query head of a group (``repeat_kv``)
before the kernel; SDPA's ``enable_gqa`` reads them in place instead, with identical results.

``apply_kernels`` swaps the ``forward`` of each plain ``nn.Linear`` instance (module types,
parameters and state dicts stay untouched, so HF ``generate``, our AR loop and BiTA all run
on it) and selects the attention function registered here; ``stock_kernels`` restores both
for a while on the same model. Gradients never go through the packed kernel: a call that
needs autograd takes ``F.linear`` on the original weight, so training computes what it did
on stock modules.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from types import MethodType

import torch
import torch.nn.functional as F
from torch import nn
from transformers import AttentionInterface, AttentionMaskInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import sdpa_mask

from ..errors import BitaError

KERNELS = ("auto", "stock")
KERNELS_HELP = "auto: oneDNN-prepacked linears where they help (CPU float32); stock: transformers' own kernels"
FAST, STOCK = "fast", "stock"
STOCK_ATTENTION, SHARED_KV_ATTENTION = "sdpa", "bita_sdpa_shared_kv"
# Weights at least this large (the LM head here) always take the packed kernel; smaller ones
# up to PACKED_MAX_ROWS rows (from the measurements above).
LARGE_WEIGHT = 1 << 22
PACKED_MAX_ROWS = 128

_linear_pointwise = torch.ops.mkldnn._linear_pointwise.default


def _packed_forward(self: nn.Linear, x: torch.Tensor) -> torch.Tensor:
    """x [..., in] -> [..., out]: the packed kernel where it is faster; ``F.linear`` on the
    original weight for autograd and for a non-CPU input."""
    rows = x.numel() // x.shape[-1]
    packed = (x.device.type == "cpu" and not (torch.is_grad_enabled() and (x.requires_grad or self.weight.requires_grad))
              and (rows <= PACKED_MAX_ROWS or self.weight.numel() >= LARGE_WEIGHT))
    if packed:
        return _linear_pointwise(x, self.bita_packed_weight, self.bias, "none", [], "")
    return F.linear(x, self.weight, self.bias)


def _sdpa_shared_kv(module: nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                    attention_mask: torch.Tensor | None, dropout: float = 0.0, scaling: float | None = None,
                    **kwargs) -> tuple[torch.Tensor, None]:
    """transformers' SDPA attention, except that under a mask the query heads of a group read
    their shared key/values inside the kernel. query [B, H, Q, D]; key, value [B, H_kv, K, D];
    attention_mask [B, 1, Q, K]. Returns [B, Q, H, D]."""
    if attention_mask is None or query.shape[1] == key.shape[1] or kwargs.get("position_bias") is not None:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      **kwargs)
    output = F.scaled_dot_product_attention(query, key, value, attn_mask=attention_mask, dropout_p=dropout,
                                            scale=scaling, enable_gqa=True)
    return output.transpose(1, 2).contiguous(), None


AttentionInterface.register(SHARED_KV_ATTENTION, _sdpa_shared_kv)
AttentionMaskInterface.register(SHARED_KV_ATTENTION, sdpa_mask)


def _packable(module: nn.Module) -> bool:
    """Plain ``nn.Linear`` (not a subclass such as a bitsandbytes layer) with a CPU float weight."""
    return type(module) is nn.Linear and module.weight.device.type == "cpu" and module.weight.dtype in (
        torch.float32, torch.bfloat16)


def _pack(weight: torch.Tensor) -> torch.Tensor | None:
    """The oneDNN-blocked copy of ``weight`` [out, in], or None where this CPU cannot run it
    (bf16 needs AVX-512 BW/VL/DQ or AVX-NE-CONVERT)."""
    try:
        return torch.ops.mkldnn._reorder_linear_weight(weight.detach(), None)
    except RuntimeError:
        return None


def apply_kernels(model: nn.Module, kernels: str = "auto") -> str:
    """Install the fast path on ``model`` where it helps; return what runs: "fast" or "stock".

    ``auto`` packs every plain ``nn.Linear`` on CPU in float32 (or bfloat16 where oneDNN can)
    and swaps SDPA attention for the shared-key/value one; it is a no-op on CUDA, for other
    dtypes and for quantised layers. ``stock`` changes nothing. The weights must stay frozen
    afterwards: the packed copies are not updated.
    """
    if kernels not in KERNELS:
        raise BitaError(f"unknown kernels {kernels!r}: choose {' or '.join(KERNELS)}")
    if kernels == STOCK or not torch.backends.mkldnn.is_available():
        return STOCK
    linears = [m for m in model.modules() if _packable(m)]
    packed = {id(m): _pack(m.weight) for m in linears}
    if not linears or any(p is None for p in packed.values()):
        return STOCK
    for module in linears:
        module.bita_packed_weight = packed[id(module)]
        module.forward = MethodType(_packed_forward, module)
    _set_attention(model, STOCK_ATTENTION, SHARED_KV_ATTENTION)
    return FAST


def _set_attention(model: nn.Module, current: str, wanted: str) -> None:
    """Switch a transformers model's attention function from ``current`` to ``wanted``
    (other implementations, such as eager, stay as they are)."""
    config = getattr(model, "config", None)
    if config is not None and config._attn_implementation == current:
        model.set_attn_implementation(wanted)


def kernels_of(model: nn.Module) -> str:
    """"fast" when ``apply_kernels`` installed the fast path on ``model``, else "stock"."""
    return FAST if any("bita_packed_weight" in vars(m) for m in model.modules()) else STOCK


@contextmanager
def stock_kernels(model: nn.Module) -> Iterator[nn.Module]:
    """Run ``model`` on the stock kernels inside the block (HF ``generate`` as users run it today)."""
    swapped = [m for m in model.modules() if "forward" in vars(m) and "bita_packed_weight" in vars(m)]
    forwards = [vars(m).pop("forward") for m in swapped]
    _set_attention(model, SHARED_KV_ATTENTION, STOCK_ATTENTION)
    try:
        yield model
    finally:
        for module, forward in zip(swapped, forwards):
            module.forward = forward
        if swapped:
            _set_attention(model, STOCK_ATTENTION, SHARED_KV_ATTENTION)
