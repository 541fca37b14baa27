"""A preallocated KV cache written in place: what the lean forward (lean_llama.py) attends over.

All layers' keys and values live in one buffer ``kv`` [layers, 2, kv_heads, capacity, head_dim];
the first ``length`` slots are valid. A pass writes its rows at slots ``length ..`` and advances
``length``; ``crop`` moves it back; ``keep`` compacts the accepted rows of a pass with one gather
over every layer at once; nothing is concatenated. It answers the part of transformers'
``DynamicCache`` the decoder uses (``get_seq_length``, ``crop`` with a negative count), so the
decode loop keeps one code path for both caches.

Two ways to write a pass: ``append`` at Python-int slots, returning the valid keys only (the eager
CPU path: attention reads ``length + R`` slots); ``write_at`` at a slot tensor, returning the whole
buffers (fixed shapes whatever ``length`` is: what a CUDA graph replays, padded.py).

A ``CachePool`` hands the same buffers to request after request, so what was recorded on a buffer
(padded.py's CUDA graphs) outlives the request; a buffer grows rarely (at least doubling).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from .device import long_tensor, to_device

GROWTH = 256  # the first buffer's slots, and at least this many beyond what a pass needs when it grows


class StaticKV:
    """``layers`` x (keys, values) of ``kv_heads`` x ``head_dim``, grown (copied, rarely) when a pass needs room."""

    def __init__(self, layers: int, kv_heads: int, head_dim: int, dtype: torch.dtype, device: torch.device,
                 capacity: int = GROWTH):
        self.kv = torch.zeros(layers, 2, kv_heads, capacity, head_dim, dtype=dtype, device=device)
        self.length = 0
        self.base = 0  # slots before the context (the adapter's prompt slots): only mask rows see them
        self.recorded: dict = {}  # per padded pass shape, padded.py's buffers on this ``kv``; emptied when it grows

    @property
    def capacity(self) -> int:
        return self.kv.shape[3]

    def get_seq_length(self) -> int:
        return self.length

    def crop(self, tokens_to_remove: int) -> None:
        """Drop the last ``-tokens_to_remove`` slots (DynamicCache's convention: a count <= 0)."""
        if tokens_to_remove > 0:
            raise ValueError(f"crop takes a count <= 0 of slots to remove, not {tokens_to_remove}")
        self.length += tokens_to_remove

    def reserve(self, rows: int) -> bool:
        """Room for ``rows`` more slots after ``length``; whether the buffer had to grow (a new tensor, at
        least twice as large: what was recorded on the old one is void)."""
        if self.length + rows <= self.capacity:
            return False
        slots = max(self.length + rows + GROWTH, 2 * self.capacity)
        grown = self.kv.new_zeros((*self.kv.shape[:3], slots, self.kv.shape[4]))
        grown[:, :, :, :self.length] = self.kv[:, :, :, :self.length]
        self.kv, self.recorded = grown, {}
        return True

    def hold_prompts(self, prompts: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
        """Put per layer prompt keys and values [1, kv_heads, P, head_dim] in the first P slots of this empty
        cache, as its ``base``."""
        count = prompts[0][0].shape[2] if prompts else 0
        self.reserve(count)
        for layer, (keys, values) in enumerate(prompts):
            self.append(layer, keys, values)
        self.advance(count)
        self.base = count

    def append(self, layer: int, keys: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Write keys, values [1, kv_heads, R, head_dim] of ``layer`` at slots length..length+R (``reserve``
        first); return that layer's valid keys and values [1, kv_heads, length + R, head_dim]. The pass
        advances ``length`` by R once every layer has written (``advance``)."""
        end = self.length + keys.shape[2]
        self.kv[layer, 0, :, self.length:end] = keys[0]
        self.kv[layer, 1, :, self.length:end] = values[0]
        return self.kv[layer, 0, :, :end][None], self.kv[layer, 1, :, :end][None]

    def write_at(self, layer: int, slots: torch.Tensor, keys: torch.Tensor,
                 values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Write keys, values [1, kv_heads, R, head_dim] of ``layer`` at slot indices ``slots`` [R] (a
        tensor on the cache's device); return the layer's whole buffers [1, kv_heads, capacity, head_dim]."""
        self.kv[layer, 0].index_copy_(1, slots, keys[0])
        self.kv[layer, 1].index_copy_(1, slots, values[0])
        return self.kv[layer, 0][None], self.kv[layer, 1][None]

    def buffers(self, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``layer``'s whole key and value buffers [kv_heads, capacity, head_dim]."""
        return self.kv[layer, 0], self.kv[layer, 1]

    def advance(self, rows: int) -> None:
        self.length += rows

    def keep(self, start: int, rows: list[int]) -> None:
        """Keep only rows ``rows`` (ascending) of the pass whose first row is at slot ``start``: one
        gather over every layer's keys and values, then ``length`` = start + len(rows)."""
        kept = len(rows)
        if rows != list(range(kept)):
            source = to_device(long_tensor(rows, start), self.kv.device)  # no wait for queued passes
            self.kv[:, :, :, start:start + kept] = self.kv[:, :, :, source]
        self.length = start + kept


class CachePool:
    """StaticKV buffers reused across requests: ``take`` a free one (emptied) or a new one from ``make``,
    ``give_back`` when the request is done. A buffer never given back is simply dropped."""

    def __init__(self, make: Callable[[], StaticKV]):
        self.make, self.free = make, []
        self.made = 0  # buffers made so far

    def take(self) -> StaticKV:
        if self.free:
            cache = self.free.pop()
            cache.length = cache.base = 0
            return cache
        self.made += 1
        return self.make()

    def forget_recorded(self, keep: set[str]) -> None:
        """Drop what the free buffers recorded for padded forwards of kinds other than ``keep`` (those a load
        tried and did not take), with the memory their CUDA graphs hold."""
        for cache in self.free:
            cache.recorded = {key: value for key, value in cache.recorded.items() if key[0] in keep}

    def give_back(self, cache: StaticKV) -> None:
        if all(cache is not free for free in self.free):
            self.free.append(cache)
