"""Hardware-aware draft tree: the shape that maximises expected tokens per second here.

Expected tokens per pass come from the adapter's draft-rank statistics (``calibration``), for
static trees and for dynamic trees of several row budgets (dynamic_plan.py), greedy or at the
request's sampling settings (sampled_forecast.py), computed once per setting and kept on disk (forecast_store.py);
seconds per pass come from passes timed on this device for this model once (the machine profile:
runtime/measured.py) and interpolated by rows per pass, a plain AR pass being the one-row point. Where no tree
beats plain AR, the answer is AR. Choosing times and forecasts nothing where both are stored.
"""

from __future__ import annotations

import itertools
import logging
import math
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np
from tqdm import tqdm

from ..decode.sampling import Sampling
from ..drafts.dynamic import DynamicShape
from ..drafts.tree import DraftTree, parse_tree_spec
from ..errors import BitaError
from ..model.adapter import BitaAdapter
from ..model.loading import LoadedModel
from ..model.rank_stats import stored_ranks
from ..runtime.measured import measured, profile_path
from . import forecast_store
from .acceptance import Forecast, forecast
from .costs import measure_pass_costs
from .dynamic_plan import DYNAMIC, DYNAMIC_ROWS, best_forecast, dynamic_shapes
from .sampled_forecast import forecasting

AUTO = "auto"
MAX_TOPK = 6
logger = logging.getLogger(__name__)
REFERENCE_TREES = ["chain:1", "efficient:3/chain-groups", "chain:3", "efficient:3,2,2/chain-groups",
                   "efficient:4,3,2", "efficient:5,5,5", "full:3,3,3"]  # span the candidates' rows
TABLE_VERSION = "v4"  # v2: groups as deep as the tree, interleaved timing; v3: keyed by kernels; v4: by the runtime


@dataclass
class CostTable:
    """Measured seconds per pass on one device: AR, and passes by row count (AR is rows 1);
    ``spread``: (rows, 25th, 75th percentile seconds) of each point, where recorded."""

    key: str
    ar: float
    points: list[tuple[int, float]]  # (rows, seconds), sorted by rows
    spread: list[tuple[int, float, float]] = field(default_factory=list)
    buckets: tuple[int, ...] = ()  # passes run padded to these row counts (CUDA graphs): points are buckets' rows

    def seconds(self, rows: float) -> float:
        """Piecewise-linear in rows (padded: at the rows of the bucket that runs them, where the cost
        steps, and past the last bucket as passes of its rows one after the other, as PaddedLean.forward
        runs them); extended past the last point along the last segment."""
        if self.buckets and rows > self.buckets[-1]:
            full, rest = divmod(math.ceil(rows), self.buckets[-1])
            return full * self.seconds(self.buckets[-1]) + (self.seconds(rest) if rest else 0.0)
        if self.buckets:
            rows = self.buckets[bisect_left(self.buckets, math.ceil(rows))]
        xs, ys = zip(*self.points)
        if rows <= xs[-1] or len(xs) == 1:
            return float(np.interp(rows, xs, ys))
        slope = (ys[-1] - ys[-2]) / max(1, xs[-1] - xs[-2])
        return ys[-1] + slope * (rows - xs[-1])

    @classmethod
    def from_entry(cls, entry: dict) -> CostTable:
        """A table as ``cost_table`` stores it."""
        return cls(entry["key"], entry["ar"], [tuple(p) for p in entry["points"]],
                   [tuple(s) for s in entry.get("spread", [])], tuple(entry.get("buckets", ())))


def cost_key(loaded: LoadedModel, adapter: BitaAdapter) -> str:
    """Pass costs depend on the model's weights, its runtime (device, dtype, forward, kernels: never a timing)
    and the adapter's P and n."""
    return "|".join([adapter.config.base.fingerprint, loaded.runtime.key, f"P{adapter.n_prompt}",
                     f"n{adapter.n_masks}", TABLE_VERSION])


def cost_table(loaded: LoadedModel, adapter: BitaAdapter, path: Path | None = None, context: int = 300,
               repeats: int = 8) -> CostTable:
    """The table for this model and runtime in the machine profile (``path``, else the cache folder's), measuring
    it (seconds) the first time, or where the work itself found it stale (plan/observed_costs.py)."""
    key = cost_key(loaded, adapter)
    buckets = loaded.runtime.buckets

    def measure() -> dict:
        rows = measure_pass_costs(loaded, adapter, REFERENCE_TREES, context, repeats)
        if buckets:  # a pass costs its bucket's replay: each measured pass is its bucket's point
            rows = [{**r, "rows": buckets[bisect_left(buckets, r["rows"])]} for r in rows if r["rows"] <= buckets[-1]]
        points = sorted({r["rows"]: r["seconds"] for r in rows}.items())  # the AR pass is the 1-row point
        spread = sorted({r["rows"]: (r["rows"], *r["spread"]) for r in rows}.values())
        return asdict(CostTable(key, rows[0]["seconds"], points, spread, buckets))

    return measured(path or profile_path(), key, "pass costs", measure, CostTable.from_entry)


def candidate_trees(n_masks: int, max_topk: int = MAX_TOPK) -> list[str]:
    """Chains, efficient trees with non-increasing top-k per depth (with and without
    ``/chain-groups``), and small full trees, for every depth up to ``n_masks``."""
    specs = []
    for depth in range(1, n_masks + 1):
        specs.append(f"chain:{depth}")
        for ks in itertools.product(range(max_topk, 0, -1), repeat=depth):
            if list(ks) == sorted(ks, reverse=True) and ks[0] > 1:
                base = "efficient:" + ",".join(map(str, ks))
                specs += [base, base + "/chain-groups"]
                if depth > 1 and int(np.prod(ks)) <= 12:
                    specs.append("full:" + ",".join(map(str, ks)) + "/chain-groups")
    return specs


Shape = DraftTree | DynamicShape


@dataclass(frozen=True)
class TreeChoice:
    """``tree`` None: no tree beats plain AR here, so decoding falls back to AR."""

    tree: Shape | None
    tokens_per_second: float  # expected, of the choice
    ar_tokens_per_second: float
    ranking: tuple[tuple[str, float, float], ...]  # (spec, tau, expected tok/s), best first
    best: Shape | None = None  # the first of ``ranking``
    chain_rows: int = 0  # rows the chains may add to a static tree's pass, priced with it

    def drafting(self) -> TreeChoice:
        """The best tree even where plain AR would be faster: for showing the method at work."""
        if self.tree is not None or self.best is None:
            return self
        return replace(self, tree=self.best, tokens_per_second=self.ranking[0][2])

    def describe(self) -> str:
        if self.tree is not None and self.tokens_per_second <= self.ar_tokens_per_second:
            return (f"auto (drafting): {self.tree.spec} ({self.tokens_per_second:.1f} tok/s expected); the fastest "
                    f"choice here is plain AR ({self.ar_tokens_per_second:.1f} tok/s)")
        if self.tree is None:
            best = self.ranking[0] if self.ranking else ("none", 0.0, 0.0)
            return (f"auto: AR ({self.ar_tokens_per_second:.1f} tok/s expected); no tree pays here, the best, "
                    f"{best[0]}, would give {best[2]:.1f} tok/s")
        chains = f", priced with the {self.chain_rows} rows chains may add" if self.chain_rows else ""
        return (f"auto: {self.tree.spec} ({self.tokens_per_second:.1f} tok/s expected vs AR "
                f"{self.ar_tokens_per_second:.1f}{chains})")


def choose_tree(ranks, costs: CostTable, n_masks: int, candidates: list[str] | None = None,
                forecasts: Sequence[tuple[Shape, Forecast]] = (), chain_rows: int = 0) -> TreeChoice:
    """The candidate with the highest expected tokens/s, or AR when none beats it: ``forecasts``
    (shapes with their forecasts), or else the static trees ``candidates`` forecast from ``ranks``.
    Where passes run at row buckets (``costs.buckets``: a pass past a bucket's rows costs the next bucket, or two
    passes past the last), a static tree's passes are priced with ``chain_rows`` more rows, the chains' candidates
    at most: a tree that fits a bucket alone may not beside them. A dynamic tree leaves the chains their rows of
    its budget; and where cost grows with every row (a CPU) the chains' rows are left out, as before."""
    forecasts = forecasts or [(tree := parse_tree_spec(spec), forecast(tree, ranks))
                              for spec in candidates or candidate_trees(n_masks)]
    chain_rows = chain_rows if costs.buckets else 0

    def expected_rate(shape: Shape, guess: Forecast) -> float:
        extra = chain_rows if isinstance(shape, DraftTree) else 0
        return guess.tokens_per_second(costs.seconds(guess.rows + extra), costs.seconds(guess.draftless_rows + extra))

    scored = sorted(((expected_rate(shape, guess), guess.tokens_per_pass, index)
                     for index, (shape, guess) in enumerate(forecasts)), key=lambda s: -s[0])
    ranking = tuple((forecasts[index][1].tree, tau, rate) for rate, tau, index in scored[:10])
    ar_rate = 1.0 / costs.ar
    best_rate, _, best = scored[0]
    best_tree = forecasts[best][0]
    if best_rate <= ar_rate:
        return TreeChoice(None, ar_rate, ar_rate, ranking, best_tree, chain_rows)
    return TreeChoice(best_tree, best_rate, ar_rate, ranking, best_tree, chain_rows)


def pass_sample_forecasts(adapter: BitaAdapter, sampling: Sampling | None = None) -> list[tuple[Shape, Forecast]]:
    """Every static candidate and dynamic budget, forecast on the adapter's pass sample, greedy or under
    ``sampling``; none where its statistics predate dynamic trees and decoding is greedy (then static
    trees are forecast from the rank counts). Sampled forecasts need the stored targets (BitaError).
    Seconds of work: ``stored_forecasts`` keeps them."""
    try:
        forecaster, passes = forecasting(adapter, sampling)
        shapes = [dynamic_shapes(adapter, rows) for rows in DYNAMIC_ROWS]
    except BitaError:
        if sampling is None or sampling.greedy:
            return []
        raise
    # static shapes first: on a tie (a dynamic tree of a static one's rows may forecast the same) the static one wins
    static = [(tree := parse_tree_spec(spec), forecaster(tree, passes)) for spec in candidate_trees(adapter.n_masks)]
    return static + [best_forecast(depths, passes, forecaster) for depths in shapes]


def shape_of(adapter: BitaAdapter, spec: str, candidates: set[str]) -> Shape:
    """The static tree or dynamic shape a stored forecast names ('dynamic:ROWS/DEPTH' or a tree spec): one of
    ``candidates`` (``candidate_trees``') or a dynamic tree of DYNAMIC_ROWS rows, the shapes ``auto`` forecasts;
    ValueError for any other (a forecasts file shipped with someone's adapter names no shape of its own)."""
    if spec.startswith(DYNAMIC + ":"):
        rows, depth = map(int, spec[len(DYNAMIC) + 1:].split("/"))
        if rows in DYNAMIC_ROWS:
            return dynamic_shapes(adapter, rows, depth)[0]
    elif spec in candidates:
        return parse_tree_spec(spec)
    raise ValueError(f"{spec[:40]!r} is not a shape auto forecasts")


def stored_forecasts(adapter: BitaAdapter, sampling: Sampling | None = None, compute: bool = True
                     ) -> tuple[list[tuple[Shape, Forecast]], str]:
    """``pass_sample_forecasts`` at ``sampling``, as stored (shipped with the adapter or cached: forecast_store.py),
    with a note where they are of another setting. A setting not stored is computed once and cached where
    ``compute`` (saying so); else the nearest stored setting's forecasts stand in for it (a request's path never
    forecasts: the tree only sets the speed, never the tokens), and only where none is stored are they computed."""
    digest = forecast_store.statistics_digest(adapter, candidate_trees(adapter.n_masks))
    name, settings = forecast_store.setting_name(sampling), forecast_store.stored_settings(adapter, digest)
    found = name if name in settings else None if compute else forecast_store.nearest(name, list(settings))
    note = "" if found in (None, name) else f" (forecasts of {found}, the nearest stored setting)"
    if found is not None:
        try:
            candidates = set(candidate_trees(adapter.n_masks))
            return [(shape_of(adapter, spec, candidates), guess) for spec, guess in
                    forecast_store.from_entries(settings[found])], note
        except (ValueError, BitaError) as error:
            logger.warning("the stored forecasts of %s are unreadable (%s): forecasting again", found, error)
    logger.info("forecasting every candidate tree at %s once (kept in %s)", name, forecast_store.cache_file(digest))
    forecasts = pass_sample_forecasts(adapter, sampling)
    if forecasts:
        forecast_store.store(digest, name, forecast_store.to_entries(forecasts))
    return forecasts, ""


def ship_forecasts(adapter: BitaAdapter) -> list[str]:
    """Forecast every candidate at each of forecast_store.SHIPPED_SETTINGS into ``adapter.config.forecasts`` (saved
    with the adapter: ``bita calibrate``), those its statistics allow; the settings forecast."""
    digest = forecast_store.statistics_digest(adapter, candidate_trees(adapter.n_masks))
    settings = {}
    for sampling in tqdm(forecast_store.SHIPPED_SETTINGS, desc="forecasting the shipped settings", unit="setting"):
        try:
            forecasts = pass_sample_forecasts(adapter, sampling)
        except BitaError:
            continue  # sampled settings need statistics of sampled answers
        if forecasts:
            settings[forecast_store.setting_name(sampling)] = forecast_store.to_entries(forecasts)
    adapter.config.forecasts = forecast_store.record(digest, settings) if settings else {}
    return list(settings)


def auto_tree(loaded: LoadedModel, adapter: BitaAdapter, sampling: Sampling | None = None,
              chain_rows: int = 0, compute: bool = True) -> tuple[TreeChoice, str]:
    """Choose for this model, adapter, device and ``sampling`` (None: greedy), with chains of up to ``chain_rows``
    candidates beside the tree, from the pass costs in the machine profile and the stored forecasts
    (``stored_forecasts``: ``compute`` False takes the nearest stored setting's); with the forecasts' note."""
    forecasts, note = stored_forecasts(adapter, sampling, compute)
    return choose_tree(stored_ranks(adapter), cost_table(loaded, adapter), adapter.n_masks, forecasts=forecasts,
                       chain_rows=chain_rows), note
