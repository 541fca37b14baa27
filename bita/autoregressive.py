"""Plain greedy autoregressive decoding: our cached loop (same step records) and HF generate."""

from __future__ import annotations

from collections.abc import Iterator

import torch
from torch import nn
from transformers import DynamicCache, GenerationConfig

from .decoding import device_of, timed
from .records import StepRecord
from .stopping import StopCondition


@torch.inference_mode()
def _ar_pass(model: nn.Module, cache: DynamicCache, tokens: list[int]) -> int:
    """Feed ``tokens`` after the cache; return the argmax next token."""
    input_ids = torch.tensor([tokens], device=device_of(model))
    logits = model(input_ids=input_ids, past_key_values=cache, use_cache=True, logits_to_keep=1).logits
    return int(logits[0, -1].argmax())


def ar_steps(model: nn.Module, prompt_ids: list[int], stop: StopCondition) -> Iterator[StepRecord]:
    """Greedy AR generation with a KV cache, one StepRecord (kind "ar") per forward pass."""
    cache = DynamicCache(config=model.config)
    device = device_of(model)
    feed, position, index, finish = list(prompt_ids), 0, 0, None
    while finish is None:
        token, seconds = timed(device, lambda: _ar_pass(model, cache, feed))
        record = StepRecord(index=index, kind="ar", position=position + len(feed) - 1, root=feed[-1],
                            rows=len(feed), bonus=token, seconds=seconds)
        record.emitted, record.finish = stop.take([token])
        finish = record.finish
        yield record
        position += len(feed)
        feed, index = [token], index + 1


def greedy_config(max_new_tokens: int, eos_token_ids: list[int]) -> GenerationConfig:
    """A fresh greedy config: no sampling or penalties inherited from the model's defaults."""
    return GenerationConfig(max_new_tokens=max_new_tokens, do_sample=False, num_beams=1,
                            eos_token_id=eos_token_ids or None, pad_token_id=eos_token_ids[0] if eos_token_ids else 0)


@torch.inference_mode()
def hf_generate(model: nn.Module, prompt_ids: list[int], max_new_tokens: int, eos_token_ids: list[int],
                prompt_lookup_tokens: int | None = None) -> list[int]:
    """The reference: transformers' greedy ``generate`` with its KV cache. Returns new tokens.
    ``prompt_lookup_tokens``: HF prompt lookup decoding, proposing that many tokens a pass
    (copied from where the last n-gram, up to 2 tokens, occurred before in prompt and output)."""
    input_ids = torch.tensor([prompt_ids], device=device_of(model))
    config = greedy_config(max_new_tokens, eos_token_ids)
    config.prompt_lookup_num_tokens = prompt_lookup_tokens
    output = model.generate(input_ids, attention_mask=torch.ones_like(input_ids), generation_config=config)
    return output[0, len(prompt_ids):].tolist()
