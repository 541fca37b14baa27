"""One pass's visibility as each attention layer of a model sees it: sliding windows cut per layer type.

``allowed_keys`` (decode/masks.py) says which keys the BiTA rules let a row see. A custom 4-D mask
reaches every layer of a transformers model as it is, so on a model with sliding-window layers
(Gemma 2/3, Mistral, Qwen2/3 with a window) those layers would see keys outside their window
and the output would stop equalling AR decoding once the context is longer than the window.
Here the window is cut into the mask of each layer type, by position ids (a tree node at
depth d sits at the root's position + d, wherever its row is), as transformers' own
``sliding_window_overlay`` does for AR decoding: key k is visible to query q iff q - k < window.
The adapter's prompt slots carry no position and are never windowed.
"""

from __future__ import annotations

import torch

from ..errors import BitaError

FULL, SLIDING = "full_attention", "sliding_attention"


def additive_mask(allowed: torch.Tensor, dtype: torch.dtype, device: torch.device | str) -> torch.Tensor:
    """Bool [..., Q, K] -> additive float mask [B, 1, Q, K] (0 where allowed, dtype min elsewhere),
    the custom 4-D mask transformers passes through unchanged to eager and SDPA attention."""
    allowed = allowed.to(device)
    if allowed.dim() == 2:
        allowed = allowed[None]
    bias = torch.zeros(allowed.shape, dtype=dtype, device=device)
    bias.masked_fill_(~allowed, torch.finfo(dtype).min)
    return bias[:, None]


def layer_windows(config) -> dict[str, int | None]:
    """Each attention layer type of ``config`` (a text config) and its window (None: full attention).

    Models without ``layer_types`` (Llama, Mistral) have one type for all layers: sliding when
    ``config.sliding_window`` is set."""
    window = getattr(config, "sliding_window", None)
    types = getattr(config, "layer_types", None) or [SLIDING if window else FULL]
    unknown = sorted(set(types) - {FULL, SLIDING})
    if unknown:
        raise BitaError(f"layers of type {', '.join(unknown)} are not supported (BiTA decodes full and "
                        "sliding-window attention layers)")
    return {kind: window if kind == SLIDING else None for kind in dict.fromkeys(types)}


def layer_kinds(config) -> list[str]:
    """Each attention layer's type, in layer order (``config.layer_types``, or one type for all)."""
    types = getattr(config, "layer_types", None)
    return list(types) if types else [next(iter(layer_windows(config)))] * config.num_hidden_layers


def within_window(query_positions: torch.Tensor, key_positions: torch.Tensor, window: int) -> torch.Tensor:
    """query_positions [..., Q], key_positions [..., K] -> bool [..., Q, K]: q - k < window."""
    return query_positions[..., :, None] - key_positions[..., None, :] < window


def windowed(allowed: torch.Tensor, query_positions: torch.Tensor, key_positions: torch.Tensor,
             window: int | None) -> torch.Tensor:
    """``allowed`` [..., Q, P + K] bool with the window applied to its last K columns (keys at
    ``key_positions`` [..., K]); the first P columns (prompt slots) are kept as they are."""
    if window is None:
        return allowed
    n_prompt = allowed.shape[-1] - key_positions.shape[-1]
    inside = within_window(query_positions, key_positions, window)
    return torch.cat([allowed[..., :n_prompt], allowed[..., n_prompt:] & inside], dim=-1)


def layer_attention_mask(config, allowed: torch.Tensor, query_positions: torch.Tensor,
                         key_positions: torch.Tensor, dtype: torch.dtype,
                         device: torch.device | str) -> torch.Tensor | dict[str, torch.Tensor]:
    """transformers' ``attention_mask`` for rows at ``query_positions`` [..., Q] under ``allowed``
    [..., Q, P + K] (P prompt slots, then keys at ``key_positions`` [..., K]) on ``config``'s layers."""
    return attention_mask_of(layer_visibility(config, allowed, query_positions, key_positions), dtype, device)


def layer_visibility(config, allowed: torch.Tensor, query_positions: torch.Tensor,
                     key_positions: torch.Tensor) -> dict[str, torch.Tensor]:
    """Per layer type of ``config``, what its rows see of ``allowed`` [..., Q, P + K] bool (``windowed``)."""
    return {kind: windowed(allowed, query_positions, key_positions, window)
            for kind, window in layer_windows(config).items()}


def attention_mask_of(visibility: dict[str, torch.Tensor], dtype: torch.dtype,
                      device: torch.device | str) -> torch.Tensor | dict[str, torch.Tensor]:
    """The ``attention_mask`` of a per-layer-type ``visibility``: one additive mask [B, 1, Q, P + K] when
    every layer type sees the same keys, else one per layer type (the mapping transformers' models with
    mixed layer types take, keyed like ``config.layer_types``)."""
    masks = {kind: additive_mask(seen, dtype, device) for kind, seen in visibility.items()}
    return next(iter(masks.values())) if len(masks) == 1 else masks
