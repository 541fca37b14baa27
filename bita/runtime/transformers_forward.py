"""Rows through transformers' own forward over a KV cache: the runtime of every model the lean forward
does not run (Gemma 2/3, Qwen3, windowed Mistral and Qwen2, GPT-2, ...), and of ``--kernels stock``.

With ``exact`` (our attention installed: hf_attention.py), a pass hands each layer the exact layout of its
token rows, which then attend row-invariantly; without, transformers' attention computes every row.

``TransformersKV`` wraps the ``DynamicCache`` it runs over, which here keeps every slot of every layer (a
sliding-window layer too): slot = P prompt slots, then the context's positions 0, 1, ..., then the
pass's rows; each layer type's window is cut into its mask (layer_masks.py).
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import DynamicCache

from .exact_attention import ExactLayout, exact_layout
from .hf_attention import EXACT_LAYOUTS
from .layer_masks import attention_mask_of, layer_kinds, layer_visibility

Prompts = list[tuple[torch.Tensor, torch.Tensor]]  # per layer, keys and values [1, kv_heads, P, head_dim]


class TransformersKV:
    """A ``DynamicCache`` (``dynamic``) holding ``base`` prompt slots and then the context, with the
    StaticKV's way of dropping a pass's rejected rows."""

    def __init__(self, prompts: Prompts):
        self.dynamic = DynamicCache(ddp_cache_data=prompts) if prompts else DynamicCache()
        self.base = prompts[0][0].shape[2] if prompts else 0

    @property
    def length(self) -> int:
        return self.dynamic.get_seq_length()

    def get_seq_length(self) -> int:
        return self.length

    def crop(self, tokens_to_remove: int) -> None:
        """Drop the last ``-tokens_to_remove`` slots (a count <= 0, as DynamicCache takes it)."""
        self.dynamic.crop(tokens_to_remove)

    def keep(self, start: int, rows: list[int]) -> None:
        """Keep only rows ``rows`` (ascending) of the pass whose first row is at slot ``start``."""
        kept = len(rows)
        if rows != list(range(kept)):
            source = torch.tensor(rows, device=self.dynamic.layers[0].keys.device) + start
            for layer in self.dynamic.layers:
                layer.keys[:, :, start:start + kept] = layer.keys[:, :, source]
                layer.values[:, :, start:start + kept] = layer.values[:, :, source]
        self.crop(start + kept - self.length)


class TransformersForward:
    """``model``'s own forward; ``exact``: its attention is ours (hf_attention.py) and a pass's token rows
    attend by their exact layouts."""

    buckets = ()  # every pass runs its own rows
    logit_rows = 0  # the LM head takes the rows as given
    logit_head = None  # the model's LM head
    token_rows = False  # Runtime.run embeds a pass's ids

    def __init__(self, model: nn.Module, exact: bool):
        self.model, self.exact_rows = model, exact
        self.config = model.config.get_text_config()

    @property
    def kind(self) -> str:
        return "transformers+exact" if self.exact_rows else "transformers"

    def describe(self) -> str:
        return "transformers' forward, " + ("our attention (token rows exact)" if self.exact_rows else
                                            "transformers' attention")

    def new_cache(self, prompts: Prompts = (), rows: int = 0) -> TransformersKV:
        """An empty cache with ``prompts`` in its first P slots (``rows``: room to reserve, none needed)."""
        return TransformersKV(list(prompts))

    def release(self, cache: TransformersKV) -> None:
        """Nothing to give back: a DynamicCache is not pooled."""

    def fastest(self) -> TransformersForward:
        """Itself: its passes run no slower for being row-invariant."""
        return self

    def forward(self, cache: TransformersKV, embeds: torch.Tensor, positions: torch.Tensor, allowed: torch.Tensor,
                ordinary: int) -> torch.Tensor:
        """Rows embeds [R, H] at ``positions`` [R] appended to ``cache``; ``allowed`` [R, cached + R] bool over
        the cache's ``base`` prompt slots, the context at positions 0, 1, ..., then the pass's rows; the first
        ``ordinary`` rows are tokens. Returns last hidden states [R, H], each sliding-window layer seeing only
        its window (layer_masks.py)."""
        device, dtype = embeds.device, embeds.dtype
        positions = positions.cpu()
        keys = torch.cat([torch.arange(allowed.shape[-1] - len(positions) - cache.base), positions])
        visibility = layer_visibility(self.config, allowed, positions, keys)
        layouts = {EXACT_LAYOUTS: self.exact_layouts(allowed, visibility, ordinary, cache.base, device)} \
            if self.exact_rows else {}
        return self.model.base_model(inputs_embeds=embeds[None], position_ids=positions.to(device)[None],
                                     attention_mask=attention_mask_of(visibility, dtype, device),
                                     past_key_values=cache.dynamic, use_cache=True, **layouts).last_hidden_state[0]

    def exact_layouts(self, allowed: torch.Tensor, visibility: dict[str, torch.Tensor], ordinary: int, base: int,
                      device: torch.device) -> list[ExactLayout | None]:
        """Per layer, the exact layout of a pass's first ``ordinary`` rows under ``allowed`` [R, P + K] (P =
        ``base``), each layer type's window ``visibility[type]`` [R, P + K] hiding keys (None: no token row)."""
        if not ordinary:
            return [None] * self.config.num_hidden_layers
        heads = self.config.num_attention_heads
        groups = heads // (getattr(self.config, "num_key_value_heads", None) or heads)
        layouts = {kind: exact_layout(allowed, ordinary, base, groups, device, windowed=seen)
                   for kind, seen in visibility.items()}
        return [layouts[kind] for kind in layer_kinds(self.config)]


@torch.no_grad()
def kv_shapes(model: nn.Module) -> list[list[int]]:
    """[kv_heads, head_dim] of each layer's cache: one token through transformers' forward into a fresh cache."""
    cache = DynamicCache()
    device = model.get_input_embeddings().weight.device
    model(input_ids=torch.zeros(1, 1, dtype=torch.long, device=device), past_key_values=cache, use_cache=True)
    return [[layer.keys.shape[1], layer.keys.shape[3]] for layer in cache.layers]
