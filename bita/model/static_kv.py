"""A preallocated KV cache written in place: what the lean forward (lean_llama.py) attends over.

Per layer, keys and values live in one buffer [1, kv_heads, capacity, head_dim]; the first
``length`` slots are valid. A pass writes its rows at slots ``length ..`` and advances
``length``; ``crop`` moves it back; nothing is concatenated. It answers the part of
transformers' ``DynamicCache`` that the decoder uses (``get_seq_length``, ``crop`` with a
negative count, ``layers[i].keys`` / ``.values`` for the in-place gather of the accepted rows),
so the decode loop keeps one code path for both caches.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

GROWTH = 256  # slots added beyond what a pass needs when the buffers must grow


@dataclass
class KVLayer:
    keys: torch.Tensor  # [1, kv_heads, capacity, head_dim]
    values: torch.Tensor


class StaticKV:
    """``layers`` buffers of ``kv_heads`` x ``head_dim``, grown (copied, rarely) when a pass needs more room."""

    def __init__(self, layers: int, kv_heads: int, head_dim: int, dtype: torch.dtype, device: torch.device,
                 capacity: int = GROWTH):
        shape = (1, kv_heads, capacity, head_dim)
        self.layers = [KVLayer(torch.zeros(shape, dtype=dtype, device=device),
                               torch.zeros(shape, dtype=dtype, device=device)) for _ in range(layers)]
        self.length = 0

    @property
    def capacity(self) -> int:
        return self.layers[0].keys.shape[2]

    def get_seq_length(self) -> int:
        return self.length

    def crop(self, tokens_to_remove: int) -> None:
        """Drop the last ``-tokens_to_remove`` slots (DynamicCache's convention: a count <= 0)."""
        if tokens_to_remove > 0:
            raise ValueError(f"crop takes a count <= 0 of slots to remove, not {tokens_to_remove}")
        self.length += tokens_to_remove

    def reserve(self, rows: int) -> None:
        """Room for ``rows`` more slots after ``length``."""
        if self.length + rows <= self.capacity:
            return
        capacity = self.length + rows + GROWTH
        for layer in self.layers:
            for name in ("keys", "values"):
                old = getattr(layer, name)
                new = old.new_zeros((*old.shape[:2], capacity, old.shape[3]))
                new[:, :, :self.length] = old[:, :, :self.length]
                setattr(layer, name, new)

    def append(self, layer: int, keys: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Write keys, values [1, kv_heads, R, head_dim] of ``layer`` at slots length..length+R (``reserve``
        first); return that layer's valid keys and values [1, kv_heads, length + R, head_dim]. The pass
        advances ``length`` by R once every layer has written (``advance``)."""
        end = self.length + keys.shape[2]
        target = self.layers[layer]
        target.keys[:, :, self.length:end] = keys
        target.values[:, :, self.length:end] = values
        return target.keys[:, :, :end], target.values[:, :, :end]

    def advance(self, rows: int) -> None:
        self.length += rows
