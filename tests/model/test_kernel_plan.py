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


def small_stack():
    torch.manual_seed(1)
    return [nn.Linear(32, 64), nn.Linear(64, 32, bias=False)], nn.Linear(32, 100)


def test_measuring_gives_a_path_for_every_bucket():
    layers, head = small_stack()
    plan = measure_plan(layers, head, (STOCK, TRANSPOSED))
    assert len(plan.layers) == len(plan.head) == len(ROW_BUCKETS)
    assert set(plan.layers) | set(plan.head) <= {STOCK, TRANSPOSED}


def test_a_plan_is_measured_once_then_read_and_a_corrupt_file_is_measured_again(tmp_path, monkeypatch):
    layers, head = small_stack()
    path = tmp_path / "plans.json"
    measured = []
    measure = kernel_plan.measure_plan
    monkeypatch.setattr(kernel_plan, "measure_plan", lambda *args: measured.append(1) or measure(*args))
    first = cached_plan(path, layers, head)
    assert measured == [1] and list(json.loads(path.read_text()).values())[0] == {"layers": list(first.layers),
                                                                                 "head": list(first.head)}
    assert cached_plan(path, layers, head) == first and measured == [1]  # read, not measured again
    path.write_text("{not json")
    monkeypatch.setattr(kernel_plan, "measure_plan", lambda *args: measured.append(1) or first)  # timings vary
    assert cached_plan(path, layers, head) == first and measured == [1, 1] and json.loads(path.read_text())
