"""transformers' attention on our CPU path: grouped key/values read in place, and the verification rows
of a pass attending by ``exact_attention``, so that models outside the lean forward (Gemma 2/3, Qwen3,
windowed Mistral and Qwen2, ...) run row-invariant passes too.

``use_exact_attention`` (called by ``apply_kernels``, kernels.py) swaps a model's "sdpa" or "eager"
attention for the function registered here under ``ROW_INVARIANT[...]``. Called as transformers calls it,
it computes what the function it replaces computes, except two things:

- under a mask with more than one query row, SDPA's ``enable_gqa`` reads a group's shared key/values in
  place instead of transformers' ``repeat_kv`` copy (identical results);
- where the pass hands it ``EXACT_LAYOUTS`` (our passes do: transformers_forward.py), one ``ExactLayout``
  per layer (indexed by the attention module's ``layer_idx``; a sliding-window layer's has its window),
  the pass's first ``layout.count`` rows (its tokens) attend by ``exact_attention`` with the layer's
  scaling and soft-capping, the other rows (mask rows) by the replaced function under their part of the
  mask.

HF ``generate`` and training hand no layouts, so they compute what transformers does.
"""

from __future__ import annotations

import sys

import torch
import torch.nn.functional as F
from torch import nn
from transformers import AttentionInterface, AttentionMaskInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import eager_mask, sdpa_mask

from .exact_attention import ExactLayout, exact_attention

EXACT_LAYOUTS = "bita_exact_layouts"  # the keyword a pass hands its layouts by: a list, one per layer
ROW_INVARIANT = {"sdpa": "bita_sdpa", "eager": "bita_eager"}  # transformers' implementation -> ours


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


def _eager(module: nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
           attention_mask: torch.Tensor | None, **kwargs) -> tuple[torch.Tensor, torch.Tensor]:
    """The eager attention of ``module``'s own modeling file (Gemma 2's soft-caps its scores)."""
    eager = sys.modules[type(module).__module__].eager_attention_forward
    return eager(module, query, key, value, attention_mask, **kwargs)


def _with_exact_rows(replaced):
    """``replaced`` (an attention function), with the rows of a pass's layout by ``exact_attention``."""

    def attention(module: nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                  attention_mask: torch.Tensor | None, dropout: float = 0.0, scaling: float | None = None,
                  **kwargs) -> tuple[torch.Tensor, torch.Tensor | None]:
        """query [1, H, Q, D]; key, value [1, H_kv, K, D]; attention_mask [1, 1, Q, K] additive.
        Returns [1, Q, H, D] and the replaced function's weights (None where every row is exact)."""
        layouts = kwargs.pop(EXACT_LAYOUTS, None)
        layout: ExactLayout | None = layouts[module.layer_idx] if layouts and hasattr(module, "layer_idx") else None
        if layout is None:
            return replaced(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs)
        count = layout.count
        exact = exact_attention(query[0, :, :count].transpose(0, 1).contiguous(), key[0], value[0], layout,
                                scaling, kwargs.get("softcap"))  # [E, H, D]
        if count == query.shape[2]:
            return exact[None], None
        attended = query.new_empty(query.shape[0], query.shape[2], query.shape[1], query.shape[3])
        attended[0, :count] = exact
        attended[:, count:], weights = replaced(
            module, query[:, :, count:].contiguous(), key, value, attention_mask[:, :, count:], dropout=dropout,
            scaling=scaling, **kwargs)
        return attended, weights

    return attention


for _stock, _replaced, _mask in (("sdpa", _sdpa_shared_kv, sdpa_mask), ("eager", _eager, eager_mask)):
    AttentionInterface.register(ROW_INVARIANT[_stock], _with_exact_rows(_replaced))
    AttentionMaskInterface.register(ROW_INVARIANT[_stock], _mask)


def our_attention(model: nn.Module) -> bool:
    """Whether ``model`` attends with ours (it then attends a pass's layouts by exact_attention)."""
    config = getattr(model, "config", None)
    return config is not None and config._attn_implementation in ROW_INVARIANT.values()


def use_exact_attention(model: nn.Module, on: bool) -> None:
    """Swap ``model``'s "sdpa" or "eager" attention for ours (``on``), or ours back; other implementations
    (FlashAttention, for one) stay as they are."""
    swaps = ROW_INVARIANT if on else {ours: stock for stock, ours in ROW_INVARIANT.items()}
    config = getattr(model, "config", None)
    if config is not None and config._attn_implementation in swaps:
        model.set_attn_implementation(swaps[config._attn_implementation])
