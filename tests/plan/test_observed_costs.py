"""The pass-cost table checked by the work itself: a clock that jitters by 30 % never makes it re-measure, a change
that would choose another tree does (once, at the next load, saying why)."""

import random

import pytest
from conftest import tiny_model

from bita.drafts.tree import parse_tree_spec
from bita.model.adapter import BitaAdapter
from bita.model.loading import LoadedModel
from bita.plan import autotree, observed_costs
from bita.plan.acceptance import Forecast
from bita.plan.autotree import CostTable, choose_tree, cost_table
from bita.plan.observed_costs import RUNS_TO_ACT, observe_run, run_medians, spread_at, stale_reason
from bita.runtime import measured
from bita.runtime.measured import profile_path, read_entries
from bita.runtime.runtime import runtime_of

SMALL, LARGE = "chain:1", "efficient:3,2,2"
# a small tree (3 rows, tau 1.5) and a large one (20 rows, tau 2.4): the large one wins while a row costs little
FORECASTS = [(parse_tree_spec(SMALL), Forecast(SMALL, 1.5, 0.0, 3, 1)),
             (parse_tree_spec(LARGE), Forecast(LARGE, 2.4, 0.0, 20, 1))]


def true_seconds(rows: int, per_row: float = 0.0002) -> float:
    """A stand-in machine: 10 ms a pass and ``per_row`` a row."""
    return 0.010 + per_row * rows


def stand_in_table(rows=(1, 3, 20)) -> CostTable:
    """The table as measured on the stand-in machine, each point's spread 5 % either way."""
    points = [(r, true_seconds(r)) for r in rows]
    return CostTable("stand-in", points[0][1], points, [(r, 0.95 * s, 1.05 * s) for r, s in points])


def choose(table: CostTable) -> str:
    choice = choose_tree(None, table, 3, forecasts=FORECASTS)
    return choice.tree.spec if choice.tree is not None else "ar"


def test_a_runs_passes_are_kept_as_medians_per_row_count_and_the_spread_interpolated():
    assert run_medians([(3, 0.01), (3, 0.03), (3, 0.02), (20, 0.5)]) == {3: 0.02}  # 20 rows: too few passes
    low, high = spread_at(stand_in_table(), 2)
    assert low == pytest.approx(0.95 * true_seconds(2)) and high == pytest.approx(1.05 * true_seconds(2))


def test_a_clock_jittering_by_30_percent_never_makes_the_table_stale():
    """Every run on a machine whose speed varies +-30 % from run to run (a busy shared machine): most runs fall
    outside the stored spread, but a run slower or faster as a whole changes no choice."""
    table, jitter, observed = stand_in_table(), random.Random(0), {3: [], 20: []}
    assert choose(table) == LARGE
    outside = 0
    for _ in range(40):
        speed = jitter.uniform(0.7, 1.3)
        for rows in observed:
            observed[rows].append(speed * true_seconds(rows))
            low, high = spread_at(table, rows)
            outside += not low <= observed[rows][-1] <= high
        assert stale_reason(table, observed, choose) is None
    assert outside > 40  # the check was exercised: runs did leave the spread


def test_rows_grown_costly_enough_to_change_the_tree_make_it_stale_after_several_runs():
    table, observed = stand_in_table(), {3: [], 20: []}
    for run in range(RUNS_TO_ACT):
        assert stale_reason(table, observed, choose) is None  # too few runs yet
        for rows in observed:
            observed[rows].append(true_seconds(rows, per_row=0.003))  # each row 15x what was stored
    reason = stale_reason(table, observed, choose)
    assert reason is not None and f"would choose {SMALL} over {LARGE}" in reason and "20 rows" in reason
    small_change = {rows: [true_seconds(rows, per_row=0.00025)] * RUNS_TO_ACT for rows in observed}
    assert stale_reason(table, small_change, choose) is None  # outside the spread, but the same tree


def test_observed_runs_mark_the_profiles_table_stale_and_the_next_load_measures_it_again(
        tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("BITA_CACHE", str(tmp_path))
    model = tiny_model("llama")
    loaded = LoadedModel(model, None, "tiny-llama", runtime_of(model))
    adapter = BitaAdapter.create(model, prompt_tokens=4, mask_tokens=3)
    measured_times = []

    def stand_in_costs(loaded, adapter, specs, context, repeats):
        measured_times.append(specs)
        return [{"tree": spec, "rows": rows, "seconds": true_seconds(rows),
                 "spread": (0.95 * true_seconds(rows), 1.05 * true_seconds(rows))}
                for spec, rows in [("ar", 1), (SMALL, 3), (LARGE, 20)]]

    monkeypatch.setattr(autotree, "measure_pass_costs", stand_in_costs)
    monkeypatch.setattr(observed_costs, "stored_forecasts", lambda *args, **kwargs: (FORECASTS, ""))
    monkeypatch.setattr(observed_costs, "stored_ranks", lambda adapter: None)
    monkeypatch.setattr(measured, "others_now", lambda: 0.0)  # a quiet machine: a stale table is measured again
    cost_table(loaded, adapter)
    jitter = random.Random(1)
    for _ in range(10):  # a jittering clock: observed, never stale, never measured again
        speed = jitter.uniform(0.7, 1.3)
        assert observe_run(loaded, adapter, None, [(rows, speed * true_seconds(rows)) for rows in (3, 20)] * 4) is None
        cost_table(loaded, adapter)
    assert len(measured_times) == 1
    entry = next(iter(read_entries(profile_path())[0].values()))
    assert sorted(entry["observed"]) == ["20", "3"] and len(entry["observed"]["20"]) == observed_costs.RUNS_KEPT
    found = [observe_run(loaded, adapter, None, [(rows, true_seconds(rows, 0.003)) for rows in (3, 20)] * 4)
             for _ in range(RUNS_TO_ACT)]  # rows grown costly: a majority of the last runs marks it stale
    assert found[0] is None and f"would choose {SMALL} over {LARGE}" in found[-1]
    cost_table(loaded, adapter)
    assert len(measured_times) == 1  # this process keeps the table it used: no request waits for a measurement
    monkeypatch.setattr(measured, "_used", set())  # the next process to load it
    cost_table(loaded, adapter)
    assert len(measured_times) == 2 and "entry is stale" in caplog.text
    cost_table(loaded, adapter)
    assert len(measured_times) == 2  # measured again once, then read
