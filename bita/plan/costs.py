"""Measured wall time of one forward pass per tree shape, on the current device."""

from __future__ import annotations

import statistics

import torch
from tqdm import tqdm

from ..decode.autoregressive import ar_steps
from ..decode.masks import decode_layout
from ..decode.pass_logits import Drafts
from ..decode.step import Decoding, new_cache, prefill, tree_step
from ..decode.stopping import StopCondition
from ..drafts.tree import parse_tree_spec
from ..model.adapter import BitaAdapter
from ..model.loading import LoadedModel

COST_TREES = ["chain:1", "chain:2", "chain:3", "efficient:3/chain-groups", "efficient:2,2,2/chain-groups",
              "efficient:3,2,2/chain-groups", "efficient:3,2,2", "efficient:4,3,2", "efficient:5,4,3",
              "efficient:5,5,5", "full:2,2,2", "full:3,3,3"]
AR_LABEL = "ar (HF-style 1-token pass)"


def measure_pass_costs(loaded: LoadedModel, adapter: BitaAdapter, specs: list[str], context: int = 300,
                       repeats: int = 10) -> list[dict]:
    """Median seconds of one pass for plain AR and for each tree over a ``context``-token cache.

    Rounds interleave one pass of each (AR first), so a machine whose speed drifts skews all
    alike; the first round is a warm-up. Returns dicts with ``tree``, ``rows``, ``seconds`` and
    ``spread`` (the 25th and 75th percentile seconds); AR first.
    """
    generator = torch.Generator().manual_seed(0)
    vocab = loaded.model.get_output_embeddings().weight.shape[0]
    prompt = torch.randint(100, vocab, (context,), generator=generator).tolist()
    runtime = loaded.runtime
    decodings = [Decoding(runtime, adapter, parse_tree_spec(spec)) for spec in specs]
    states = [prefill(decoding, prompt, new_cache(runtime, adapter))[0] for decoding in decodings]
    ar = ar_steps(runtime, prompt, StopCondition(repeats + 2))
    next(ar)  # the prefill is not a decoding pass
    times: list[list[float]] = [[] for _ in range(len(decodings) + 1)]
    for index in tqdm(range(repeats + 1), desc="pass cost", unit="round"):
        times[0].append(next(ar).seconds)
        for decoding, state, seconds in zip(decodings, states, times[1:]):
            shape = (decoding.tree.depth, decoding.tree.max_rank)
            state.rewind(adapter.n_prompt, Drafts(torch.randint(100, vocab, shape, generator=generator),
                                                  torch.full(shape, 0.5)))
            _, record = tree_step(decoding, state, index)
            seconds.append(record.seconds)
    ar.close()
    for state in states:
        runtime.release(state.cache)
    rows = [(AR_LABEL, 1)] + [(spec, decode_layout(r.tree, r.tree.depth).rows) for spec, r in zip(specs, decodings)]
    return [{"tree": label, "rows": n, "seconds": statistics.median(t[1:]), "spread": quartiles(t[1:])}
            for (label, n), t in zip(rows, times)]


def quartiles(seconds: list[float]) -> tuple[float, float]:
    """The 25th and 75th percentile of ``seconds`` (both the value itself for one)."""
    if len(seconds) < 2:
        return seconds[0], seconds[0]
    cuts = statistics.quantiles(seconds, n=4)
    return cuts[0], cuts[2]
