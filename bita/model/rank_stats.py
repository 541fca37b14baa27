"""Draft-rank statistics as an adapter stores them: written by calibration, read by planning.

A scored pass is a rank tuple: per depth d, the rank of the true token among the drafts of
mask d (MISS when it is not among the first MAX_RANK). The adapter config keeps how often each
tuple occurred, under ``acceptance``.
"""

from __future__ import annotations

from collections import Counter

from ..errors import BitaError
from .adapter import BitaAdapter

MISS = -1  # the true token is not among the drafted candidates
MAX_RANK = 8  # ranks at or beyond this count as MISS
SOURCE = "teacher-forced held-out self-generated answers"


def acceptance_record(ranks: list[tuple[int, ...]], max_rank: int = MAX_RANK, samples: int = 0) -> dict:
    """JSON-ready summary: how often each rank tuple occurred."""
    counts = Counter(",".join(map(str, r)) for r in ranks)
    return {"source": SOURCE, "samples": samples, "passes": len(ranks), "max_rank": max_rank,
            "rank_counts": dict(counts.most_common())}


def stored_ranks(adapter: BitaAdapter) -> Counter[tuple[int, ...]]:
    """Rank tuple -> number of scored passes, as recorded in the adapter's config."""
    record = adapter.config.acceptance
    if not record or not record.get("rank_counts"):
        raise BitaError("this adapter has no acceptance statistics: run 'python -m bita calibrate --adapter DIR'")
    return Counter({tuple(int(v) for v in key.split(",")): count for key, count in record["rank_counts"].items()})
