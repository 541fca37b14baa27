"""The pass-cost table checked by the work itself, never by re-timing it: each finished BiTA decoding adds, per row
count, the median seconds of its passes to the table's entry in the machine profile (the last RUNS_KEPT runs).
The table is marked stale, and measured again at the next load saying why, only where the last RUNS_TO_ACT runs
all fell outside the stored spread at some row count **and** the table with those observed seconds would choose
another tree: noise that would change no choice changes nothing.

Pure functions (``spread_at``, ``stale_reason``) over a CostTable and observations; ``observe_run`` is the one
that reads and writes the profile.
"""

from __future__ import annotations

import logging
import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace

import numpy as np

from ..decode.records import StepRecord
from ..decode.sampling import Sampling
from ..model.adapter import BitaAdapter
from ..model.loading import LoadedModel
from ..model.rank_stats import stored_ranks
from ..runtime.measured import profile_path, update_entry
from .autotree import CostTable, choose_tree, cost_key, stored_forecasts

RUNS_KEPT = 8  # a row count's last run medians kept beside the table
RUNS_TO_ACT = 3  # runs in a row outside the stored spread before the observed seconds are weighed at all
MIN_PASSES = 3  # a run's passes of a row count needed for its median to count
logger = logging.getLogger(__name__)


def run_medians(passes: Iterable[tuple[int, float]]) -> dict[int, float]:
    """(rows, seconds) of a run's passes -> rows: median seconds, for row counts with MIN_PASSES passes or more."""
    grouped: dict[int, list[float]] = defaultdict(list)
    for rows, seconds in passes:
        grouped[rows].append(seconds)
    return {rows: statistics.median(times) for rows, times in grouped.items() if len(times) >= MIN_PASSES}


def spread_at(table: CostTable, rows: int) -> tuple[float, float]:
    """The stored 25th-75th percentile seconds of a pass of ``rows`` rows (interpolated between measured points;
    the point itself at both ends where the table keeps no spread)."""
    if not table.spread:
        seconds = table.seconds(rows)
        return seconds, seconds
    xs, lows, highs = zip(*table.spread)
    return float(np.interp(rows, xs, lows)), float(np.interp(rows, xs, highs))


def stale_reason(table: CostTable, observed: dict[int, list[float]], choose: Callable[[CostTable], str]
                 ) -> str | None:
    """Why ``table`` should be measured again, or None: at some row count the last RUNS_TO_ACT run medians of
    ``observed`` ({rows: [run medians, oldest first]}) all lie outside its spread, and ``choose`` (a table -> the
    spec it chooses) picks otherwise on the table as observed: each point scaled by the ratio of observed to stored
    seconds (the median of the last RUNS_TO_ACT runs), interpolated by rows between the observed row counts. A pass
    that is only slower or faster as a whole (a shorter context than the table's, a busier machine) scales every
    point alike and changes no choice."""
    ratios, outside = {}, {}
    for rows, runs in observed.items():
        recent = runs[-RUNS_TO_ACT:]
        if len(recent) < RUNS_TO_ACT:
            continue
        low, high = spread_at(table, rows)
        ratios[rows] = statistics.median(recent) / table.seconds(rows)
        if all(not low <= seconds <= high for seconds in recent):
            outside[rows] = statistics.median(recent)
    if not outside:
        return None
    xs = sorted(ratios)
    scale = lambda rows: float(np.interp(rows, xs, [ratios[x] for x in xs]))  # noqa: E731
    points = [(rows, seconds * scale(rows)) for rows, seconds in table.points]
    seen = replace(table, ar=points[0][1], points=points, spread=[])
    before, after = choose(table), choose(seen)
    if before == after:
        return None
    where = "; ".join(f"{rows} rows {1000 * seconds:.1f} ms against {1000 * table.seconds(rows):.1f} stored"
                      for rows, seconds in sorted(outside.items()))
    return f"passes on the last {RUNS_TO_ACT} runs ({where}) would choose {after} over {before}"


def observe_run(loaded: LoadedModel, adapter: BitaAdapter, sampling: Sampling | None,
                passes: Iterable[tuple[int, float]]) -> str | None:
    """Add a finished run's passes ((rows, seconds) each) to the observations of its pass-cost table in the machine
    profile, marking the table stale where ``stale_reason`` says so (and returning why). Nothing where the profile
    holds no table for this model and runtime (nothing was measured: nothing to check)."""
    medians = run_medians(passes)
    if not medians:
        return None
    found: list[str] = []

    def choose(table: CostTable) -> str:
        forecasts, _ = stored_forecasts(adapter, sampling, compute=False)
        choice = choose_tree(stored_ranks(adapter), table, adapter.n_masks, forecasts=forecasts)
        return choice.tree.spec if choice.tree is not None else "ar"

    def add(entry: dict) -> None:
        observed = entry.setdefault("observed", {})
        for rows, seconds in medians.items():
            observed[str(rows)] = (observed.get(str(rows), []) + [seconds])[-RUNS_KEPT:]
        reason = stale_reason(CostTable.from_entry(entry["value"]),
                              {int(rows): runs for rows, runs in observed.items()}, choose)
        if reason:
            entry["stale"] = reason
            found.append(reason)
            logger.warning("the pass costs in the machine profile are stale (%s): measured again at the next load",
                           reason)

    update_entry(profile_path(), cost_key(loaded, adapter), add)
    return found[0] if found else None


def observed(loaded: LoadedModel, adapter: BitaAdapter, sampling: Sampling | None,
             steps: Iterator[StepRecord]) -> Iterator[StepRecord]:
    """``steps`` as they come; once they have all come, their decoding passes observed (``observe_run``). A stream
    left unfinished (a request cancelled) adds nothing."""
    passes = []
    for record in steps:
        if record.kind != "prefill":
            passes.append((record.rows, record.seconds))
        yield record
    observe_run(loaded, adapter, sampling, passes)
