"""Draft-rank statistics as an adapter stores them: written by calibration, read by planning.

A scored pass is a rank tuple: per depth d, the rank of the true token among the drafts of
mask d (MISS when it is not among the first MAX_RANK). The adapter config keeps, under
``acceptance``: how often each tuple occurred (``rank_counts``, what static trees are forecast
from); the reliability of the drafts' probabilities per depth (``reliability``, what dynamic trees
score nodes with); and a sample of whole passes, ranks with their drafts' probabilities and the
n-gram chain's outcome, and where calibration had a corpus the corpus chain's (``pass_sample``, what
dynamic trees and chains are forecast from); how often the corpus chain was right to each depth by
its match length (``corpus``, what gates it);
and for the first of those passes the target's distribution per depth (``target_sample``,
target_stats.py: what sampled decoding is forecast from). ``sampled_contexts`` holds the same two
samples for answers that were themselves sampled (at its ``temperature``): the contexts a sampled
request decodes in, less predictable than greedy answers.
"""

from __future__ import annotations

from collections import Counter

import torch

from ..errors import BitaError
from .adapter import BitaAdapter
from .target_stats import TARGET_PASSES, encode_target

MISS = -1  # the true token is not among the drafted candidates
MAX_RANK = 8  # ranks at or beyond this count as MISS
SOURCE = "teacher-forced held-out self-generated answers"
EDGES = (0.01, 0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)  # reliability bins' upper ends
SAMPLE_PASSES, SAMPLE_RANKS = 1500, 6  # passes kept whole, and drafts per depth kept with them
NGRAM_CHAIN = 16  # n-gram chains scored up to this length (a shorter chain's outcome is a truncation)
CHAIN_COLUMNS = ("ngram proposed", "ngram right", "corpus proposed", "corpus right", "corpus match")


def acceptance_record(ranks: torch.Tensor, probs: torch.Tensor, chains: torch.Tensor, max_rank: int = MAX_RANK,
                      samples: int = 0, targets: dict[str, torch.Tensor] | None = None) -> dict:
    """JSON-ready statistics of N scored passes: ranks [N, depth] long, probs [N, depth, max_rank],
    chains [N, 5] (``CHAIN_COLUMNS``: the n-gram chain's tokens proposed and right, the corpus chain's
    and its match length, -1 without a corpus), targets (the target's distribution per depth:
    target_stats.target_summaries' tensors and ``answered`` [N, depths] bool) as
    calibration.heldout_passes gives them."""
    counts = Counter(",".join(map(str, r)) for r in ranks.tolist())
    corpus = {"corpus": {"rates": corpus_rates(chains)}} if (chains[:, 4] >= 0).any() else {}
    return {"source": SOURCE, "samples": samples, "passes": len(ranks), "max_rank": max_rank,
            "rank_counts": dict(counts.most_common()),
            "reliability": {"edges": list(EDGES), "rates": reliability_rates(ranks, probs)}, **corpus,
            **pass_sample_record(ranks, probs, chains, targets)}


def pass_sample_record(ranks: torch.Tensor, probs: torch.Tensor, chains: torch.Tensor,
                       targets: dict[str, torch.Tensor] | None = None, passes: int = SAMPLE_PASSES) -> dict:
    """A random sample of ``passes`` passes kept whole (``pass_sample``), the first TARGET_PASSES of them
    with the target's distribution (``target_sample``, where ``targets`` are given); shapes as in
    ``acceptance_record``."""
    sample = torch.randperm(len(ranks), generator=torch.Generator().manual_seed(0))[:passes]
    sampled_targets = {} if targets is None else {"target_sample": [
        encode_target(*(targets[key][i].tolist() for key in ("top", "log_mass", "draft_index", "answer_index",
                                                                "answered")), drafted=ranks.shape[1])
        for i in sample[:TARGET_PASSES].tolist()]}
    return {"pass_sample": [encode_pass(r, p, n) for r, p, n in zip(
        ranks[sample].tolist(), probs[sample, :, :SAMPLE_RANKS].mul(1000).round().int().tolist(),
        chains[sample].tolist())], **sampled_targets}


def encode_pass(ranks: list[int], permille: list[list[int]], chains: list[int]) -> str:
    """One sampled pass as one line of the config: 'RANKS|PROBS PER DEPTH|CHAINS', comma-separated
    numbers, depths' probabilities (per mille) separated by ';', the chains' outcome as
    ``CHAIN_COLUMNS`` (the n-gram chain's alone where there was no corpus):
    '0,-1,0|546,91;382,166;213,93|0,0,3,2,7'."""
    chains = chains[:2] if len(chains) < 5 or chains[4] < 0 else chains
    return f"{','.join(map(str, ranks))}|{';'.join(','.join(map(str, row)) for row in permille)}|" + ",".join(
        map(str, chains))


def decode_pass(line: str) -> tuple[tuple[int, ...], list[list[float]], int, int, tuple[int, int, int] | None]:
    """``encode_pass``'s line -> (ranks, probabilities [depth][rank], n-gram tokens proposed, right,
    the corpus chain's (tokens proposed, right, match length) or None)."""
    ranks, probs, chains = line.split("|")
    proposed, right, *corpus = (int(v) for v in chains.split(","))
    if corpus and len(corpus) != 3:
        raise ValueError(f"a pass's chains hold 2 or 5 numbers: {chains!r}")
    return (tuple(int(v) for v in ranks.split(",")),
            [[int(v) / 1000 for v in row.split(",")] for row in probs.split(";")], proposed, right,
            tuple(corpus) if corpus else None)


def corpus_rates(chains: torch.Tensor) -> list[list[float]]:
    """[match length m][d]: the share of passes whose corpus chain matched m tokens of the history and
    was right to depth d + 1 or further (0 .. NGRAM_CHAIN - 1), m from 0 to the longest seen; chains
    [N, 5] as ``acceptance_record`` takes them. Non-increasing in d; lengths never seen are 0."""
    right, match = chains[:, 3], chains[:, 4]
    depths = torch.arange(1, NGRAM_CHAIN + 1)
    rates = []
    for m in range(int(match.max()) + 1):
        hit = right[match == m, None] >= depths  # [passes with match m, NGRAM_CHAIN]
        rates.append([round(v, 4) for v in hit.double().mean(0).tolist()] if len(hit) else [0.0] * NGRAM_CHAIN)
    return rates


def reliability_rates(ranks: torch.Tensor, probs: torch.Tensor) -> list[list[float]]:
    """[depth][bin]: the share of drafts with probability in bin b (``EDGES``) at depth d that were
    the true token, over passes whose true tokens of depths < d were all drafted; made
    non-decreasing in the probability (pooled with the bin below where a bin's rate falls)."""
    rates = []
    for depth in range(ranks.shape[1]):
        reached = (ranks[:, :depth] != MISS).all(1)
        p = probs[reached, depth]  # [M, max_rank]
        hit = ranks[reached, depth, None] == torch.arange(p.shape[1])
        bins = torch.bucketize(p, torch.tensor(EDGES)).clamp(max=len(EDGES) - 1).flatten()
        count = torch.bincount(bins, minlength=len(EDGES)).double()
        hits = torch.bincount(bins, weights=hit.flatten().double(), minlength=len(EDGES))
        rates.append(_pooled(hits.tolist(), count.tolist()))
    return rates


def _pooled(hits: list[float], counts: list[float]) -> list[float]:
    """hits/counts per bin, made non-decreasing by pooling adjacent violators (bins with no count
    take their neighbours' rate)."""
    blocks: list[list[float]] = []  # [hits, count, bins]
    for h, c in zip(hits, counts):
        blocks.append([h, c, 1])
        while len(blocks) > 1 and blocks[-2][0] * max(blocks[-1][1], 1e-9) > blocks[-1][0] * max(blocks[-2][1], 1e-9):
            h2, c2, n2 = blocks.pop()
            blocks[-1] = [blocks[-1][0] + h2, blocks[-1][1] + c2, blocks[-1][2] + n2]
    return [round(h / c, 4) if c else 0.0 for h, c, n in blocks for _ in range(int(n))]


def stored_ranks(adapter: BitaAdapter) -> Counter[tuple[int, ...]]:
    """Rank tuple -> number of scored passes, as recorded in the adapter's config."""
    record = adapter.config.acceptance
    if not record or not record.get("rank_counts"):
        raise BitaError("this adapter has no acceptance statistics: run 'python -m bita calibrate --adapter DIR'")
    return Counter({tuple(int(v) for v in key.split(",")): count for key, count in record["rank_counts"].items()})

