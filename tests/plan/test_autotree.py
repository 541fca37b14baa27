"""Tree choice from acceptance statistics and a cost table: pure, no model."""

from collections import Counter

import pytest

from bita.decode.masks import decode_layout
from bita.model.rank_stats import MISS
from bita.plan.autotree import CostTable, candidate_trees, choose_tree


def table(ar=0.05, points=((8, 0.08), (20, 0.10), (60, 0.20))):
    return CostTable("test", ar, list(points))


def test_costs_interpolate_by_rows_and_extend_past_the_last_point():
    costs = table()
    assert costs.seconds(8) == pytest.approx(0.08) and costs.seconds(14) == pytest.approx(0.09)
    assert costs.seconds(100) == pytest.approx(0.30)  # slope of the last segment: 0.0025 s a row
    assert costs.seconds(2) == pytest.approx(0.08)  # below the first point: its cost


def test_candidates_cover_chains_efficient_and_full_trees():
    specs = candidate_trees(3, max_topk=3)
    assert {"chain:1", "chain:2", "chain:3", "efficient:3,2,2", "efficient:3,2,2/chain-groups",
            "full:2,2,2/chain-groups"} <= set(specs)
    assert "efficient:2,3" not in specs and "efficient:1,1" not in specs and len(specs) == len(set(specs))


def test_sure_drafts_pick_the_deepest_cheap_tree():
    ranks = Counter({(0, 0, 0): 100})
    choice = choose_tree(ranks, table(), 3)
    assert choice.tree.spec == "chain:3" and choice.tokens_per_second > choice.ar_tokens_per_second
    assert choice.ranking[0][1] == pytest.approx(4.0) and "chain:3" in choice.describe()


def test_second_ranks_favour_siblings():
    ranks = Counter({(1, MISS, MISS): 60, (0, 0, MISS): 40})
    flat = table(points=((4, 0.08), (200, 0.0801)))  # rows nearly free: wide trees cost nothing extra
    assert choose_tree(ranks, flat, 3).tree.max_rank >= 2


def test_when_no_tree_pays_the_choice_is_ar():
    ranks = Counter({(MISS, MISS, MISS): 90, (0, MISS, MISS): 10})
    choice = choose_tree(ranks, table(ar=0.02), 3)
    assert choice.tree is None and choice.tokens_per_second == pytest.approx(50.0)
    assert "no tree pays" in choice.describe()


def test_cost_table_is_measured_once_then_read_from_the_profile(tmp_path):
    """On a tiny model: AR is the 1-row point, rows follow the layouts, each point keeps its spread, and later
    reads take the stored table as it is (whatever it says: nothing re-times it on a load)."""
    from conftest import tiny_model

    from bita.decode.masks import decode_layout
    from bita.drafts.tree import parse_tree_spec
    from bita.model.adapter import BitaAdapter
    from bita.model.loading import LoadedModel
    from bita.plan.autotree import REFERENCE_TREES, cost_table
    from bita.runtime.runtime import runtime_of

    model = tiny_model("llama")
    loaded = LoadedModel(model, None, "tiny-llama", runtime_of(model))
    adapter = BitaAdapter.create(model, prompt_tokens=4, mask_tokens=3)
    path = tmp_path / "profile.json"
    table = cost_table(loaded, adapter, path, context=40, repeats=2)
    expected_rows = {1} | {decode_layout(parse_tree_spec(s), parse_tree_spec(s).depth).rows for s in REFERENCE_TREES}
    assert [rows for rows, _ in table.points] == sorted(expected_rows)
    assert table.points[0] == (1, table.ar) and all(seconds > 0 for _, seconds in table.points)
    assert [rows for rows, _, _ in table.spread] == sorted(expected_rows)
    assert all(low <= seconds <= high for (_, seconds), (_, low, high) in zip(table.points, table.spread))
    path.write_text(path.read_text().replace(str(table.ar), "123.0"))  # a re-measure would not give 123 s
    for _ in range(3):  # read as stored, never checked by timing it again
        assert cost_table(loaded, adapter, path).ar == 123.0


def test_the_pass_cost_table_is_found_again_after_the_dtype_choice_is_re_timed(tmp_path, monkeypatch):
    """The table is keyed by the runtime's key, which holds no timing: a dtype choice timed again (its cached
    entry gone) describes itself with other milliseconds, and the table measured before is read, not timed again."""
    from conftest import tiny_model

    from bita.model.adapter import BitaAdapter
    from bita.model.loading import LoadedModel
    from bita.plan import autotree
    from bita.plan.autotree import cost_table
    from bita.runtime import precision
    from bita.runtime.build import make_runtime
    from bita.runtime.measured import PROFILE_FILE, read_entries, write_entries

    monkeypatch.setattr(precision, "bf16_hardware", lambda: True)  # a dtype choice that times, native kernels or not
    timings = iter([{"1 rows": 10.0, "8 rows": 12.0}, {"1 rows": 8.0, "8 rows": 9.0},  # float32, bfloat16
                    {"1 rows": 11.0, "8 rows": 13.0}, {"1 rows": 7.0, "8 rows": 8.5}])  # timed again
    monkeypatch.setattr(precision, "pass_milliseconds", lambda runtime: next(timings))
    first = make_runtime(tiny_model("llama"), "auto", True, "", tmp_path)
    adapter = BitaAdapter.create(first.model, prompt_tokens=4, mask_tokens=3)
    costs = tmp_path / PROFILE_FILE
    table = cost_table(LoadedModel(first.model, None, "tiny", first), adapter, costs, context=40, repeats=2)
    entries, _ = read_entries(tmp_path / PROFILE_FILE)
    write_entries(tmp_path / PROFILE_FILE, {k: v for k, v in entries.items() if not k.startswith("dtype-choice")})
    second = make_runtime(tiny_model("llama"), "auto", True, "", tmp_path)
    assert "12.0" in first.describe() and "13.0" in second.describe() and second.key == first.key

    def timed_again(*args, **kwargs):
        raise AssertionError("the pass costs were timed again")

    monkeypatch.setattr(autotree, "measure_pass_costs", timed_again)
    assert cost_table(LoadedModel(second.model, None, "tiny", second), adapter, costs) == table


def test_a_padded_table_prices_a_pass_at_its_row_bucket():
    """With CUDA graphs a pass of R rows replays its bucket's graph: the cost steps at the buckets."""
    points = [(1, 0.010), (8, 0.012), (16, 0.016), (128, 0.040)]
    buckets = (1, 2, 4, 8, 16, 32, 64, 128)
    padded, linear = CostTable("gpu", 0.010, points, buckets=buckets), CostTable("cpu", 0.010, points)
    assert padded.seconds(5) == padded.seconds(8) == 0.012 and padded.seconds(9) == 0.016
    assert linear.seconds(5) < 0.012 and padded.seconds(32) == pytest.approx(linear.seconds(32))  # interpolated
    # past the last bucket: passes of its rows one after the other (128 rows, then 72 in the 128 bucket)
    assert padded.seconds(200) == pytest.approx(2 * 0.040) and padded.seconds(129) == pytest.approx(0.040 + 0.010)


def test_one_shape_prices_a_tree_with_its_chains_and_keeps_it_within_one_pass():
    """At one shape of 64 rows (the row-invariant GPU forward) every pass up to 64 rows costs the same and one of
    65 two: a 64-row tree beside a 4-token n-gram chain is two passes; the choice fits tree and chain in one."""
    one_shape = CostTable("gpu", 0.002, [(64, 0.0022)], buckets=(64,))
    assert one_shape.seconds(64) == one_shape.seconds(3) == 0.0022 and one_shape.seconds(65) == pytest.approx(0.0044)
    ranks = Counter({(0, 0, 0): 50, (1, 1, 1): 20, (2, 2, 2): 15, (3, 3, 3): 10, (4, 4, 4): 5})
    alone = choose_tree(ranks, one_shape, 3)
    beside = choose_tree(ranks, one_shape, 3, chain_rows=4)
    layout_rows = lambda tree: decode_layout(tree, tree.depth).rows  # noqa: E731
    assert layout_rows(alone.tree) > 60 >= layout_rows(beside.tree)
    assert "priced with the 4 rows chains may add" in beside.describe()
    linear = CostTable("cpu", 0.002, [(1, 0.002), (64, 0.0022)])  # no buckets: chains priced as before, not at all
    assert choose_tree(ranks, linear, 3, chain_rows=4) == choose_tree(ranks, linear, 3)


def test_a_drafting_choice_keeps_the_best_tree_where_ar_is_faster():
    ranks = Counter({(MISS, MISS, MISS): 90, (0, MISS, MISS): 10})
    choice = choose_tree(ranks, table(ar=0.02), 3)
    drafting = choice.drafting()
    assert choice.tree is None and drafting.tree.spec == choice.ranking[0][0]
    assert drafting.tokens_per_second == pytest.approx(choice.ranking[0][2])
    assert drafting.tokens_per_second < drafting.ar_tokens_per_second
    assert "fastest choice here is plain AR" in drafting.describe()
    paying = choose_tree(Counter({(0, 0, 0): 100}), table(), 3)
    assert paying.drafting() == paying
