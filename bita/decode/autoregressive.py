"""Plain autoregressive decoding, greedy or sampled: our cached loop, with the same step records as BiTA."""

from __future__ import annotations

from collections.abc import Iterator

import torch
from torch import nn
from transformers import DynamicCache

from ..model.device import device_of, output_logits, timed
from ..model.static_kv import StaticKV
from .records import StepRecord
from .sampling import GREEDY, RaceNoise, Sampling, next_token
from ..model.rows import forward_rows, release_cache
from .step import new_cache
from .stopping import StopCondition


@torch.inference_mode()
def _ar_pass(model: nn.Module, cache: DynamicCache | StaticKV, tokens: list[int], sampling: Sampling,
             noise: RaceNoise | None) -> int:
    """Feed ``tokens`` after the cache; return the next token (argmax, or the race winner of p with
    ``noise``'s vector for its position: what ``torch.multinomial`` draws), causal over the cache, by
    the forward BiTA's passes run on (model/rows.py)."""
    input_ids = torch.tensor(tokens, device=device_of(model))
    rows, cached = len(tokens), cache.get_seq_length()
    allowed = torch.ones(rows, cached + rows, dtype=torch.bool).tril(cached)
    hidden = forward_rows(model, cache, model.get_input_embeddings()(input_ids), torch.arange(cached, cached + rows),
                          allowed)
    return next_token(output_logits(model, hidden[-1:])[0], sampling, noise, cached + rows)


def ar_steps(model: nn.Module, prompt_ids: list[int], stop: StopCondition,
             sampling: Sampling = GREEDY) -> Iterator[StepRecord]:
    """AR generation with a KV cache, one StepRecord (kind "ar") per forward pass; greedy, or
    sampled (bita/decode/sampling.py) with one race noise for this run seeded from ``sampling.seed``:
    the draws of HF ``generate(do_sample=True)`` with that seed, one vector a token."""
    cache = new_cache(model, rows=len(prompt_ids) + stop.max_new_tokens)  # untimed: graphs recorded here
    device = device_of(model)
    noise = sampling.noise(len(prompt_ids), device)
    feed, position, index, finish = list(prompt_ids), 0, 0, None
    try:
        while finish is None:
            token, seconds = timed(device, lambda: _ar_pass(model, cache, feed, sampling, noise))
            record = StepRecord(index=index, kind="ar", position=position + len(feed) - 1, root=feed[-1],
                                rows=len(feed), bonus=token, seconds=seconds, sampled=not sampling.greedy)
            record.emitted, record.finish = stop.take([token])
            finish = record.finish
            yield record
            position += len(feed)
            if noise is not None:
                noise.forget(position + 1)
            feed, index = [token], index + 1
    finally:
        release_cache(model, cache)
