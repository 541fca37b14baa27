"""Forecasts under sampling: what a tree (static or dynamic) and n-gram chains accept when every token
is drawn from the warped target distribution instead of taken greedily.

The drafts are deterministic, so the sampled walk (docs/sampling.md) lands on a node's child c with
exactly the target's warped probability of c's token at that node. The adapter's stored passes keep
the target's distribution per depth along held-out answers (bita/model/target_stats.py), greedy ones
and ones sampled again (``sampling_passes`` mixes them by temperature), so below every node on the
answer's path the chance of each draft is known; below a node off that path the
target's distribution is not known, and its children count as rejected (there the forecast errs
low). The answer's own token is on the tree where the masks drafted it on the answer's path or the
n-gram chain was right so far; then the walk goes on down the answer's path.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from functools import lru_cache, partial

import numpy as np

from ..decode.sampling import Sampling
from ..drafts.dynamic import DynamicShape
from ..drafts.tree import ROOT, DraftTree
from ..errors import BitaError
from ..model.adapter import BitaAdapter
from ..model.target_stats import BETAS, OUTSIDE, TargetDepth
from .acceptance import Forecast
from .dynamic_plan import PassOutcome, ScoredPass, decode_passes, forecast_passes, stored_passes

OUTDATED = "this adapter's statistics predate sampled forecasts: run 'python -m bita calibrate --adapter DIR'"


@lru_cache(maxsize=1 << 14)  # each pass's depths are warped once per setting, not once per tree
def warped_top(depth: TargetDepth, sampling: Sampling) -> list[float]:
    """The warped probabilities of the target's likeliest tokens at ``depth`` (as many as stored),
    after temperature, top-k and top-p in transformers' order. The stored tokens' mass at beta = 1/T
    is exact; the rest (the tail) is interpolated in log between the stored betas, and above the last
    bounded: it shrinks at least as fast as its largest token, which is below the stored ones."""
    beta, top = 1.0 / sampling.temperature, depth.top
    top_mass = lambda b: sum(math.exp(b * x) for x in top)  # noqa: E731
    tails = [max(math.exp(mass) - top_mass(b), 1e-12) for b, mass in zip(BETAS, depth.log_mass)]
    if beta >= BETAS[-1]:
        tail = tails[-1] * math.exp((beta - BETAS[-1]) * top[-1])
    else:  # linear in log, extended below the first beta along the first segment
        segment = max(0, int(np.searchsorted(BETAS, beta)) - 1)
        share = (beta - BETAS[segment]) / (BETAS[segment + 1] - BETAS[segment])
        tail = math.exp((1 - share) * math.log(tails[segment]) + share * math.log(tails[segment + 1]))
    normaliser = top_mass(beta) + tail
    probs = [math.exp(beta * x) / normaliser for x in top]
    if 0 < sampling.top_k <= len(probs):
        kept = probs[:sampling.top_k]
        probs = [p / sum(kept) for p in kept]
    if sampling.top_p < 1.0:
        covered = np.cumsum(probs)
        last = int(np.searchsorted(covered, sampling.top_p))  # the nucleus ends here, or past the stored tokens
        mass = covered[last] if last < len(probs) else sampling.top_p  # HF keeps just over top_p
        probs = [p / mass for p in probs[:last + 1]]
    return probs


def sampled_outcome(masks: DraftTree, scored: ScoredPass, proposed: int, right: int,
                    sampling: Sampling) -> PassOutcome:
    """Expected outcome of one pass of ``masks`` (and chains, the better ``right`` tokens right) when every
    token is sampled (see the module docstring); ``scored`` must carry its targets."""
    warped = [warped_top(depth, sampling) for depth in scored.targets]
    chance = lambda d, index: warped[d][index] if OUTSIDE < index < len(warped[d]) else 0.0  # noqa: E731
    answer = [chance(d, depth.answer) for d, depth in enumerate(scored.targets)]
    # the walk down the answer's path: ``node`` is on it (the last mask node while the chain leads on),
    # reached with chance ``reach``; ``ends_groupless``: a path ending there leaves no mask group
    node, on_masks, reach, accepted, groupless, ends_groupless = ROOT, True, 1.0, 0.0, 0.0, False
    for d, depth in enumerate(scored.targets):
        kids = masks.children[node] if on_masks else ()
        true_rank = scored.ranks[d] if d < len(scored.ranks) else None
        on_path = next((c for c in kids if masks.nodes[c].rank == true_rank), None)
        off = [(chance(d, depth.drafts[masks.nodes[c].rank]), masks.nodes[c].has_group) for c in kids
               if c != on_path and masks.nodes[c].rank < len(depth.drafts)]
        drafted = on_path is not None or d < right
        lands = sum(p for p, _ in off) + (answer[d] if drafted else 0.0)
        accepted += reach * lands
        groupless += reach * (sum(p for p, group in off if not group) + ends_groupless * (1.0 - lands))
        if not drafted:
            break
        reach *= answer[d]
        ends_groupless = on_path is None or not masks.nodes[on_path].has_group
        node, on_masks = (on_path, True) if on_path is not None else (node, False)
    else:
        groupless += reach * ends_groupless
    chain = [math.prod(answer[:j]) for j in range(1, min(right, len(answer)) + 1)]
    return PassOutcome(1.0 + accepted, groupless, sum(chain), chain[0] if chain else 0.0)


def sampled_passes(passes: list[ScoredPass]) -> list[ScoredPass]:
    """The passes that carry the target's distribution (the first of a stored sample)."""
    kept = [scored for scored in passes if scored.targets]
    if not kept:
        raise BitaError(OUTDATED)
    return kept


def sampling_passes(adapter: BitaAdapter, sampling: Sampling) -> list[ScoredPass]:
    """What a request sampled with ``sampling`` is forecast from: the passes of greedy answers and of
    answers sampled at the stored temperature T_c (``sampled_contexts``), mixed T : T_c - T (only the
    sampled ones from T_c up): a sampled answer's own context is less predictable than a greedy one,
    the more so the hotter it is sampled."""
    record = (adapter.config.acceptance or {}).get("sampled_contexts")
    if not record:
        raise BitaError(OUTDATED)
    greedy, sampled = sampled_passes(stored_passes(adapter)), sampled_passes(decode_passes(record))
    count = min(len(greedy), len(sampled))
    hot = round(count * min(sampling.temperature / record["temperature"], 1.0))
    return sampled[:hot] + greedy[:count - hot]


def forecast_sampled(tree: DraftTree | DynamicShape, passes: list[ScoredPass], sampling: Sampling,
                     ngram_tokens: int = 0, corpus_lengths: Sequence[int] = ()) -> Forecast:
    """``dynamic_plan.forecast_passes`` when every token is sampled with ``sampling`` (not greedy)."""
    return forecast_passes(tree, sampled_passes(passes), ngram_tokens, partial(sampled_outcome, sampling=sampling),
                           corpus_lengths)


Forecaster = Callable[..., Forecast]  # (tree or shape, passes, ngram_tokens=0, corpus_lengths=()) -> Forecast


def forecasting(adapter: BitaAdapter, sampling: Sampling | None) -> tuple[Forecaster, list[ScoredPass]]:
    """How requests decoded with ``sampling`` (None or greedy: the greedy walk) are forecast, and on which
    of the adapter's stored passes (BitaError where it lacks them)."""
    if sampling is None or sampling.greedy:
        return forecast_passes, stored_passes(adapter)

    def at_setting(tree: DraftTree | DynamicShape, passes: list[ScoredPass], ngram_tokens: int = 0,
                   corpus_lengths: Sequence[int] = ()) -> Forecast:
        return forecast_sampled(tree, passes, sampling, ngram_tokens, corpus_lengths)

    return at_setting, sampling_passes(adapter, sampling)
