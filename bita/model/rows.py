"""Rows through the frozen model over a KV cache, on either forward: the lean one over a StaticKV
(lean_llama.py), or transformers' over a DynamicCache whose attention, where it is ours
(hf_attention.py), attends the pass's verification rows row-invariantly by the layouts handed to it.
Our AR loop, BiTA's passes and the row-invariance probe all run their rows here.

A DynamicCache here keeps every slot of every layer (a sliding-window layer too): slot = P prompt
slots, then the context's positions 0, 1, ..., then the pass's rows; each layer type's window is cut
into its mask (layer_masks.py).
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import DynamicCache

from .exact_attention import ExactLayout, exact_layout, exact_rows
from .hf_attention import EXACT_LAYOUTS, runs_exact_rows
from .layer_masks import attention_mask_of, layer_kinds, layer_visibility
from .lean_llama import lean_of
from .static_kv import StaticKV

Prompts = list[tuple[torch.Tensor, torch.Tensor]]  # per layer, keys and values [1, kv_heads, P, head_dim]


@torch.inference_mode()
def cache_with(model: nn.Module, prompts: Prompts, rows: int = 0) -> DynamicCache | StaticKV:
    """An empty cache for ``model``'s forward holding ``prompts`` in its first P slots: a StaticKV from
    the lean forward's pool where it runs the model (room for ``rows`` slots past the prompt slots, its
    graphs recorded: padded.py), else a DynamicCache. Give it back with ``release_cache``."""
    lean = lean_of(model)
    if lean is None:
        return DynamicCache(ddp_cache_data=prompts) if prompts else DynamicCache()
    count = prompts[0][0].shape[2] if prompts else 0
    cache = lean.new_cache(rows + count)
    if prompts:
        for layer, (keys, values) in enumerate(prompts):
            cache.append(layer, keys, values)
        cache.advance(count)
        cache.base = count
    return cache


def release_cache(model: nn.Module, cache: DynamicCache | StaticKV) -> None:
    """A request is done with ``cache``: a pooled one goes back for the next request to reuse."""
    lean = lean_of(model)
    if lean is not None and isinstance(cache, StaticKV):
        lean.release(cache)


def forward_rows(model: nn.Module, cache: DynamicCache | StaticKV, embeds: torch.Tensor, positions: torch.Tensor,
                 allowed: torch.Tensor, n_prompt: int = 0) -> torch.Tensor:
    """Rows embeds [R, H] at ``positions`` [R] through the frozen model, appended to ``cache``;
    ``allowed`` [R, cached + R] bool, where the cache holds ``n_prompt`` prompt slots and then the
    ordinary tokens at positions 0, 1, ... Returns last hidden states [R, H]: the lean forward's for
    a StaticKV, transformers' for a DynamicCache (within 1e-5 on tiny models, tests/model/test_lean_llama.py;
    bit-identical logits on the default model, benchmarks/lean_forward.py), each sliding-window layer
    seeing only its window (layer_masks.py)."""
    if isinstance(cache, StaticKV):
        return lean_of(model).forward(cache, embeds, positions, allowed)
    device, dtype = embeds.device, embeds.dtype
    config = model.config.get_text_config()
    positions = positions.cpu()
    keys = torch.cat([torch.arange(allowed.shape[-1] - len(positions) - n_prompt), positions])
    visibility = layer_visibility(config, allowed, positions, keys)
    layouts = {EXACT_LAYOUTS: exact_layouts(config, allowed, visibility, n_prompt, device)} \
        if runs_exact_rows(model) else {}
    return model.base_model(inputs_embeds=embeds[None], position_ids=positions.to(device)[None],
                            attention_mask=attention_mask_of(visibility, dtype, device),
                            past_key_values=cache, use_cache=True, **layouts).last_hidden_state[0]


def exact_layouts(config, allowed: torch.Tensor, visibility: dict[str, torch.Tensor], n_prompt: int,
                  device: torch.device) -> list[ExactLayout | None]:
    """Per layer of ``config``, the exact layout of a pass's rows under ``allowed`` [R, P + K] (P =
    ``n_prompt``), each layer type's window ``visibility[type]`` [R, P + K] hiding keys (None: no row
    of the pass is exact)."""
    rows = exact_rows(allowed, n_prompt)
    if not len(rows):
        return [None] * config.num_hidden_layers
    heads = config.num_attention_heads
    groups = heads // (getattr(config, "num_key_value_heads", None) or heads)
    layouts = {kind: exact_layout(allowed, rows, n_prompt, groups, device, windowed=seen)
               for kind, seen in visibility.items()}
    return [layouts[kind] for kind in layer_kinds(config)]


def keep_cache_rows(cache: DynamicCache | StaticKV, start: int, rows: list[int]) -> None:
    """Keep only new rows ``rows`` (ascending) of the pass that began at cache slot ``start``."""
    if isinstance(cache, StaticKV):
        cache.keep(start, rows)
        return
    kept = len(rows)
    if rows != list(range(kept)):
        source = torch.tensor(rows, device=cache.layers[0].keys.device) + start
        for layer in cache.layers:
            layer.keys[:, :, start:start + kept] = layer.keys[:, :, source]
            layer.values[:, :, start:start + kept] = layer.values[:, :, source]
    cache.crop(-(cache.get_seq_length() - start - kept))
