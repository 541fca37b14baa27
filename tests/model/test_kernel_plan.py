"""The kernel plan: row buckets, the choice of the fastest path, and the cache on disk (no model)."""

import json

import pytest
import torch
from torch import nn

from bita.model import kernel_plan
from bita.model.kernel_plan import (
    PACKED,
    PATHS,
    ROW_BUCKETS,
    STOCK,
    TRANSPOSED,
    KernelPlan,
    bucket_of,
    cached_plan,
    measure_plan,
    pack,
    row_floor,
    run_path,
)


def test_a_pass_takes_the_first_bucket_that_holds_its_rows():
    assert [ROW_BUCKETS[bucket_of(rows)] for rows in (1, 2, 3, 8, 9, 128, 129, 5000)] == \
        [1, 2, 4, 8, 16, 128, 128, 128]


def test_the_plan_says_what_runs_where():
    plan = KernelPlan((STOCK,) + (TRANSPOSED,) * 6 + (STOCK,), (PACKED,) * len(ROW_BUCKETS))
    assert plan.describe() == "layers: 1 stock, 2-64 transposed, 128 stock; head: packed"


def test_another_path_replaces_stock_only_when_clearly_faster():
    assert kernel_plan._fastest({STOCK: 1.0, TRANSPOSED: 0.99, PACKED: 1.2}) == STOCK  # within MIN_GAIN: noise
    assert kernel_plan._fastest({STOCK: 1.0, TRANSPOSED: 0.90, PACKED: 0.95}) == TRANSPOSED


@pytest.mark.parametrize("path", PATHS)
def test_every_path_computes_the_linear(path):
    torch.manual_seed(0)
    linear = nn.Linear(24, 40)
    x = torch.randn(3, 5, 24)
    with torch.inference_mode():
        out = run_path(path, x, linear.weight, linear.bias, linear.weight.t().contiguous(), pack(linear.weight))
    torch.testing.assert_close(out, linear(x), atol=1e-5, rtol=1e-5)


def test_a_path_below_its_floor_runs_padded_and_gives_the_rows_it_gives_among_others(monkeypatch):
    """A path that rounds a lone row otherwise (here: a matrix-vector kernel made to add its products in
    another order) gets floor 2, and run_path then gives a lone row what it gives it among others."""
    torch.manual_seed(3)
    weight = torch.randn(40, 300)

    def lone_rows_differ(x, w, b=None):
        products = x[..., None, :] * w  # [..., out, in]: each row alone, whatever the row count
        if x.numel() // x.shape[-1] == 1:  # a lone row: the same products, even and odd ones summed apart
            return products[..., ::2].sum(-1) + products[..., 1::2].sum(-1)
        return products.sum(-1)

    monkeypatch.setattr(kernel_plan.F, "linear", lone_rows_differ)
    monkeypatch.setattr(kernel_plan, "_floors", {})
    assert row_floor(STOCK, weight, None, None, None) == 2
    x = torch.randn(5, 300)
    among = run_path(STOCK, x, weight, None, None, None)
    assert not all(torch.equal(run_path(STOCK, x[i:i + 1], weight, None, None, None), among[i:i + 1]) for i in range(5))
    assert all(torch.equal(run_path(STOCK, x[i:i + 1], weight, None, None, None, floor=2), among[i:i + 1])
               for i in range(5))


def small_stack():
    torch.manual_seed(1)
    return [nn.Linear(32, 64), nn.Linear(64, 32, bias=False)], nn.Linear(32, 100)


def test_measuring_gives_one_path_for_every_bucket():
    """One path per linear whatever the row count: a row's result must not depend on how many rows
    share its pass (docs/method.md)."""
    layers, head = small_stack()
    plan = measure_plan(layers, head, (STOCK, TRANSPOSED))
    assert len(plan.layers) == len(plan.head) == len(ROW_BUCKETS)
    assert len(set(plan.layers)) == len(set(plan.head)) == 1 and set(plan.layers) | set(plan.head) <= {STOCK, TRANSPOSED}


def test_the_one_path_is_the_fastest_over_a_decoding_passs_row_counts():
    """Summed over DECODE_BUCKETS: a path fast at one row count only loses to one fast at all of them."""
    table = [{STOCK: 1.0, PACKED: 0.5 if rows == 2 else 2.0} for rows in ROW_BUCKETS]
    assert kernel_plan.plan_from({"layers": table, "head": table}).layers == (STOCK,) * len(ROW_BUCKETS)
    table = [{STOCK: 1.0, PACKED: 0.8} for _ in ROW_BUCKETS]
    assert kernel_plan.plan_from({"layers": table, "head": [{}] * len(ROW_BUCKETS)}) == KernelPlan(
        (PACKED,) * len(ROW_BUCKETS), (STOCK,) * len(ROW_BUCKETS))


def test_a_plan_is_measured_once_then_read_and_a_corrupt_file_is_measured_again(tmp_path, monkeypatch):
    layers, head = small_stack()
    path = tmp_path / "plans.json"
    timed = []
    times = kernel_plan.kernel_times
    monkeypatch.setattr(kernel_plan, "_probed", set())
    monkeypatch.setattr(kernel_plan, "kernel_times", lambda *args: timed.append(args[3:]) or times(*args))
    first = cached_plan(path, layers, head)
    stored = list(json.loads(path.read_text()).values())[0]
    assert timed == [()] and (stored["layers"], stored["head"]) == (list(first.layers), list(first.head))
    assert len(stored["seconds"]["layers"]) == len(ROW_BUCKETS)  # the times it was chosen from
    assert cached_plan(path, layers, head) == first and timed == [()]  # read, not timed again (nor probed: done)
    path.write_text("{not json")
    again = cached_plan(path, layers, head)  # timings vary: the plan may differ
    assert len(again.layers) == len(ROW_BUCKETS) and timed == [(), ()] and json.loads(path.read_text())


def probe_times(stock: float, packed: float) -> dict:
    return {name: [{STOCK: stock, TRANSPOSED: 9.0, PACKED: packed}] * len(kernel_plan.PROBE_BUCKETS)
            for name in ("layers", "head")}


def test_a_probe_flags_a_plan_path_clearly_slower_than_another_now():
    packed = KernelPlan((PACKED,) * len(ROW_BUCKETS), (PACKED,) * len(ROW_BUCKETS))
    assert kernel_plan.probe_disagrees(packed, probe_times(stock=1.0, packed=1.1)) is None  # within the margin
    found = kernel_plan.probe_disagrees(packed, probe_times(stock=1.0, packed=1.3))
    assert found == "layers at 2 + 8 rows: the plan's packed 2600.0 ms, stock 2000.0 ms now"
    missing = {"layers": [{STOCK: 1.0, TRANSPOSED: 2.0}] * 2, "head": [{}] * 2}
    assert "not available" in kernel_plan.probe_disagrees(packed, missing)


def test_a_cached_plan_is_probed_once_a_process_and_timed_again_where_it_disagrees(tmp_path, monkeypatch, caplog):
    layers, head = small_stack()
    path = tmp_path / "plans.json"
    key = kernel_plan.plan_key(layers, head)
    timed_under_load = KernelPlan((TRANSPOSED,) * len(ROW_BUCKETS), (TRANSPOSED,) * len(ROW_BUCKETS))
    path.write_text(json.dumps({key: {"layers": list(timed_under_load.layers), "head": list(timed_under_load.head)}}))
    calls = []

    def fake_times(layers, head, paths=PATHS, buckets=ROW_BUCKETS, repeats=5):  # stock clearly fastest now
        calls.append(tuple(buckets))
        return {name: [{STOCK: 1.0, TRANSPOSED: 2.0, PACKED: 3.0}] * len(buckets) for name in ("layers", "head")}

    monkeypatch.setattr(kernel_plan, "kernel_times", fake_times)
    monkeypatch.setattr(kernel_plan, "_probed", set())
    plan = cached_plan(path, layers, head)
    assert calls == [kernel_plan.PROBE_BUCKETS, ROW_BUCKETS] and set(plan.layers) == set(plan.head) == {STOCK}
    assert "disagrees with a probe now (layers at 2 + 8 rows: the plan's transposed 4000.0 ms" in caplog.text
    assert json.loads(path.read_text())[key]["layers"] == [STOCK] * len(ROW_BUCKETS)
    monkeypatch.setattr(kernel_plan, "_probed", set())  # a new process: the re-timed plan agrees with a probe
    assert cached_plan(path, layers, head) == plan and calls[2:] == [kernel_plan.PROBE_BUCKETS]
    assert cached_plan(path, layers, head) == plan and len(calls) == 3  # once a process
