"""Plain autoregressive decoding, greedy or sampled: our cached loop, with the same step records as BiTA."""

from __future__ import annotations

from collections.abc import Iterator

import torch

from ..runtime.device import long_tensor, timed
from ..runtime.runtime import Cache, Runtime
from ..runtime.token_rows import TokenRows
from .explain import RowVerdict, row_verdicts
from .records import StepRecord
from .sampling import GREEDY, RaceNoise, Sampling, next_token
from .step import new_cache
from .stopping import StopCondition


@torch.inference_mode()
def _ar_pass(runtime: Runtime, cache: Cache, tokens: list[int], sampling: Sampling, noise: RaceNoise | None,
             record_verdicts: bool) -> tuple[int, list[RowVerdict], float]:
    """Feed ``tokens`` after the cache; return the next token (argmax, or the race winner of p with
    ``noise``'s vector for its position: what ``torch.multinomial`` draws), causal over the cache, on the
    runtime BiTA's passes run on, what the verifier said of it (when ``record_verdicts``, else []), and the
    seconds of the pass and LM head alone."""
    rows, cached = len(tokens), cache.get_seq_length()
    allowed = torch.ones(rows, cached + rows, dtype=torch.bool).tril(cached)
    logits, pass_seconds = timed(runtime.device, lambda: runtime.logits(runtime.run(
        cache, TokenRows(long_tensor(tokens)), torch.arange(cached, cached + rows), allowed)[-1:]))
    token = next_token(logits[0], sampling, noise, cached + rows)
    verdicts = []
    if record_verdicts:  # sampled, with the draws the token won
        drawn = [noise.vector(cached + rows, logits.shape[-1])] if noise is not None else ()
        verdicts = row_verdicts(logits, [token], [[]], sampling, runtime.dtype, drawn)
    return token, verdicts, pass_seconds


def ar_steps(runtime: Runtime, prompt_ids: list[int], stop: StopCondition, sampling: Sampling = GREEDY,
             record_verdicts: bool = False) -> Iterator[StepRecord]:
    """AR generation with a KV cache on ``runtime``, one StepRecord (kind "ar") per forward pass; greedy, or
    sampled (bita/decode/sampling.py) with one race noise for this run seeded from ``sampling.seed``:
    the draws of HF ``generate(do_sample=True)`` with that seed, one vector a token. ``record_verdicts``:
    records carry what the model's row said of each token (bita/decode/explain.py)."""
    cache = new_cache(runtime, rows=len(prompt_ids) + stop.max_new_tokens)  # untimed: graphs recorded here
    noise = sampling.noise(len(prompt_ids), runtime.device)
    feed, position, index, finish = list(prompt_ids), 0, 0, None
    try:
        while finish is None:
            (token, verdicts, pass_seconds), seconds = timed(runtime.device, lambda: _ar_pass(
                runtime, cache, feed, sampling, noise, record_verdicts))
            record = StepRecord(index=index, kind="ar", position=position + len(feed) - 1, root=feed[-1],
                                rows=len(feed), bonus=token, seconds=seconds, pass_seconds=pass_seconds,
                                sampled=not sampling.greedy, verdicts=verdicts)
            record.emit(*stop.take([token]))
            finish = record.finish
            yield record
            position += len(feed)
            if noise is not None:
                noise.forget(position + 1)
            feed, index = [token], index + 1
    finally:
        runtime.release(cache)
