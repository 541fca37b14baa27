"""The kernel plan: the choice of the fastest path, and the cache on disk (no model)."""

import json
import logging
import types

import pytest
import torch
import torch.nn.functional as F
from gguf import GGMLQuantizationType
from gguf_weights import block_weight
from torch import nn

from bita.runtime import device, kernel_plan, measured, native
from bita.runtime.blocks import blocks_of, with_blocks
from bita.runtime.kernel_plan import (
    AMX,
    BLOCK_PATHS,
    BLOCKS,
    BLOCKS_DOT,
    BLOCKS_Q8,
    DOT,
    NATIVE,
    PACKED,
    PATHS,
    STOCK,
    TRITON,
    DECODE_ROWS,
    TIMED_ROWS,
    TRANSPOSED,
    KernelPlan,
    cached_plan,
    measure_plan,
    products_of,
    row_floor,
    run_path,
    weight_copy,
)


def test_the_plan_says_what_runs():
    assert KernelPlan(TRANSPOSED, PACKED).describe() == "layers transposed, head packed"


def test_a_stored_plan_is_read_and_an_unknown_one_refused():
    """An entry naming no known path, or another format, is unreadable, so measured again."""
    assert KernelPlan.from_entry({"layers": TRANSPOSED, "head": PACKED}) == KernelPlan(TRANSPOSED, PACKED)
    for wrong in ({"layers": [STOCK, PACKED], "head": [STOCK]}, {"layers": "fast", "head": STOCK}, {"layers": STOCK}):
        with pytest.raises((ValueError, KeyError)):
            KernelPlan.from_entry(wrong)
    with pytest.raises(ValueError, match="not offered here"):  # a known path this machine did not offer: crafted
        KernelPlan.from_entry({"layers": TRITON, "head": STOCK}, offered=(STOCK, PACKED))


def test_another_path_replaces_stock_only_when_clearly_faster():
    assert kernel_plan._fastest({STOCK: 1.0, TRANSPOSED: 0.99, PACKED: 1.2}) == STOCK  # within MIN_GAIN: noise
    assert kernel_plan._fastest({STOCK: 1.0, TRANSPOSED: 0.90, PACKED: 0.95}) == TRANSPOSED
    # 8-bit activations change the tokens: taken over the exact blocks path only by more than 15 %, never by noise
    assert kernel_plan._fastest({STOCK: 3.0, BLOCKS: 1.0, BLOCKS_Q8: 0.9}) == BLOCKS
    assert kernel_plan._fastest({STOCK: 3.0, BLOCKS: 1.0, BLOCKS_DOT: 0.95, BLOCKS_Q8: 0.82}) == BLOCKS_DOT
    assert kernel_plan._fastest({STOCK: 3.0, BLOCKS: 1.0, BLOCKS_Q8: 0.6}) == BLOCKS_Q8


@pytest.mark.parametrize("path", PATHS)
def test_every_path_computes_the_linear(path, tmp_path):
    """In float32 (AMX, DOT and BLOCKS_DOT: bf16, which they alone take, within bf16's rounding; BLOCKS_Q8 within
    its 8-bit activations' rounding); the blocks paths on a weight held in Q8_0 blocks."""
    why = native.KERNELS[path].unavailable() if path in native.KERNELS else None
    if why:
        pytest.skip(why)
    dtype, tolerance = (torch.bfloat16, 2e-2) if path in (AMX, DOT, BLOCKS_DOT) else (torch.float32, 1e-5)
    tolerance = 2e-2 if path == BLOCKS_Q8 else tolerance
    torch.manual_seed(0)
    linear = nn.Linear(32, 40).to(dtype)
    weight = linear.weight
    if path in BLOCK_PATHS:
        held = block_weight(tmp_path, 40, 32, GGMLQuantizationType.Q8_0)
        weight = with_blocks(held.to(dtype), blocks_of(held))
    x = torch.randn(3, 5, 32).to(dtype)
    with torch.inference_mode():
        out = run_path(path, x, weight, linear.bias, weight_copy(path, weight))
        expected = F.linear(x.double(), weight.double(), linear.bias.double())
    torch.testing.assert_close(out.double(), expected, atol=tolerance, rtol=tolerance)


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
    assert row_floor(STOCK, weight, None, None) == 2
    x = torch.randn(5, 300)
    among = run_path(STOCK, x, weight, None, None)
    assert not all(torch.equal(run_path(STOCK, x[i:i + 1], weight, None, None), among[i:i + 1]) for i in range(5))
    assert all(torch.equal(run_path(STOCK, x[i:i + 1], weight, None, None, floor=2), among[i:i + 1])
               for i in range(5))


def small_stack():
    """Two layer products and a head (weight [out, in], bias), as a forward runs them."""
    torch.manual_seed(1)
    layers, head = [nn.Linear(32, 64), nn.Linear(64, 32, bias=False)], nn.Linear(32, 100)
    return products_of(layers), products_of([head])[0]


def test_measuring_gives_one_path_for_the_layers_and_one_for_the_head():
    """One path per linear whatever the row count: a row's result must not depend on how many rows
    share its pass (docs/method.md)."""
    layers, head = small_stack()
    plan = measure_plan(layers, head, (STOCK, TRANSPOSED))
    assert {plan.layers, plan.head} <= {STOCK, TRANSPOSED}


def times_table(seconds) -> list[dict[str, float]]:
    return [seconds(rows) for rows in TIMED_ROWS]


def test_the_one_path_is_the_fastest_over_a_decoding_passs_row_counts():
    """Summed over DECODE_ROWS: a path fast at one row count only loses to one fast at all of them."""
    table = times_table(lambda rows: {STOCK: 1.0, PACKED: 0.5 if rows == 4 else 2.0})
    assert kernel_plan.plan_from({"rows": list(TIMED_ROWS), "layers": table, "head": table}).layers == STOCK
    table = times_table(lambda rows: {STOCK: 1.0, PACKED: 0.8})
    assert kernel_plan.plan_from({"rows": list(TIMED_ROWS), "layers": table,
                                  "head": times_table(lambda rows: {})}) == KernelPlan(PACKED, STOCK)


def test_a_plan_is_measured_once_then_read_and_a_corrupt_file_is_measured_again(tmp_path, monkeypatch, caplog):
    layers, head = small_stack()
    path = tmp_path / "profile.json"
    timed = []
    times = kernel_plan.kernel_times
    monkeypatch.setattr(kernel_plan, "kernel_times", lambda *args: timed.append(args[3:]) or times(*args))
    with caplog.at_level("INFO"):
        first = cached_plan(path, layers, head)
    assert "no kernel plan for this machine" in caplog.text
    stored = list(measured.read_entries(path)[0].values())[0]["value"]
    assert timed == [()] and (stored["layers"], stored["head"]) == (first.layers, first.head)
    assert stored["seconds"]["rows"] == list(DECODE_ROWS)  # the times it was chosen from
    for _ in range(3):  # read, never timed again (no probe: a load times nothing)
        assert cached_plan(path, layers, head) == first and timed == [()]
    path.write_text("{not json")
    cached_plan(path, layers, head)  # timings vary: the plan may differ
    assert timed == [(), ()] and measured.read_entries(path)[0]


def stand_in_paths(monkeypatch, seconds_a_row: dict[str, float], floors: dict[str, int]):
    """Replace the paths' products with stand-ins that take ``seconds_a_row`` x rows on a virtual clock (the one
    the timing reads, so the times are exact on any machine, however loaded) and round a block of fewer than
    ``floors[path]`` rows otherwise than among others (so ``row_floor`` measures that floor)."""
    real = kernel_plan.run_path
    clock = [0.0]

    def stand_in(path, x, weight, bias, copy, floor=1, residual=None):
        rows = x.numel() // x.shape[-1]
        if rows < floor:
            return real(path, x, weight, bias, copy, floor, residual)
        clock[0] += seconds_a_row[path] * rows
        flat = x.reshape(rows, x.shape[-1])
        out = torch.stack([weight @ row for row in flat]).reshape(*x.shape[:-1], -1)  # a row alone: row-invariant
        out = out + bias if bias is not None else out
        return out + 1e-3 if rows < floors[path] else out

    monkeypatch.setattr(kernel_plan, "run_path", stand_in)
    monkeypatch.setattr(kernel_plan, "_floors", {})
    monkeypatch.setattr(device, "time", types.SimpleNamespace(perf_counter=lambda: clock[0]))


def test_a_path_is_priced_at_its_floor_and_a_floor_of_64_loses_to_a_floor_of_1_of_similar_one_row_time(monkeypatch):
    """A path whose lone rows round otherwise (floor 64) pays 64 rows in every AR pass: timed as passes run it, it
    is never chosen over a floor-1 path that is a little slower at one unpadded row (the Xeon's 64-row AR passes)."""
    stand_in_paths(monkeypatch, {STOCK: 1e-4, TRANSPOSED: 1.1e-4}, {STOCK: 64, TRANSPOSED: 1})
    layers, head = small_stack()
    times = kernel_plan.kernel_times(layers, head, (STOCK, TRANSPOSED), rows=(1, 4, 8, 16), repeats=1)
    assert times["floors"]["layers"] == {STOCK: 64, TRANSPOSED: 1}
    one_row = times["layers"][0]
    assert one_row[STOCK] == pytest.approx(64 / 1.1 * one_row[TRANSPOSED])  # 64 rows' time, padded
    assert kernel_plan.plan_from(times) == KernelPlan(TRANSPOSED, TRANSPOSED)


def test_the_lean_forward_plans_on_the_fused_products_it_runs():
    """Timed on what the lean forward runs: Q/K/V and gate/up fused (the modules' weights views of them), not the
    separate weights; fusing again finds them fused and copies nothing."""
    from conftest import tiny_model

    from bita.runtime.kernels import run_products

    model = tiny_model("llama")
    head = model.get_output_embeddings()
    linears = [m for m in model.modules() if type(m) is nn.Linear and m is not head]
    products = run_products(model, linears)
    config = model.config
    width = config.num_attention_heads * config.hidden_size // config.num_attention_heads
    assert len(products) == 4 * config.num_hidden_layers
    assert products[0][0].shape == (width + 2 * config.num_key_value_heads * width // config.num_attention_heads,
                                    config.hidden_size)
    assert products[2][0].shape == (2 * config.intermediate_size, config.hidden_size)
    q_proj = model.model.layers[0].self_attn.q_proj
    assert q_proj.weight.data_ptr() == products[0][0].data_ptr()
    again = run_products(model, linears)
    assert all(a.data_ptr() == b.data_ptr() and torch.equal(a, b) for (a, _), (b, _) in zip(products, again))


def test_a_kernel_this_cpu_lacks_is_not_offered_and_said_once(monkeypatch, caplog):
    """Where the native library holds no dot or AMX kernel (a CPU without AVX512-BF16 or AMX-BF16), the plan offers
    neither and says why once, at info; bf16 weights still get the native path where the library loads."""
    if native.unavailable() is not None:
        pytest.skip(native.unavailable())
    monkeypatch.setattr(native, "dot_unavailable", lambda: "no dot kernel here")
    monkeypatch.setattr(native, "amx_unavailable", lambda: "no AMX kernel here")
    monkeypatch.setattr(kernel_plan, "_said", set())
    weight = torch.randn(8, 8).bfloat16()
    with caplog.at_level(logging.INFO, logger=kernel_plan.__name__):
        for _ in range(2):
            paths = kernel_plan.offered_paths(weight)
            assert NATIVE in paths and DOT not in paths and AMX not in paths
    said = [record.getMessage() for record in caplog.records]
    assert said == ["no dot kernel here; the kernel plan offers no dot path",
                    "no AMX kernel here; the kernel plan offers no amx path"]


def test_a_path_hopeless_at_a_row_count_is_timed_no_further_and_cannot_win(monkeypatch):
    """A path DROP_FACTOR slower than the fastest so far at one row is not timed at 4, 8 and 16 rows (on a Zen 3
    one such path took 10 minutes at every row count); the plan is chosen among the paths timed at all of them."""
    stand_in_paths(monkeypatch, {STOCK: 1e-3, TRANSPOSED: 1e-4, PACKED: 1.2e-4}, {STOCK: 1, TRANSPOSED: 1, PACKED: 1})
    layers, head = small_stack()
    times = kernel_plan.kernel_times(layers, head, (STOCK, TRANSPOSED, PACKED), repeats=1)
    assert times["rows"] == list(DECODE_ROWS)
    assert [set(seconds) for seconds in times["layers"]] == [{STOCK, TRANSPOSED, PACKED}] + [{TRANSPOSED, PACKED}] * 3
    assert kernel_plan.plan_from(times) == KernelPlan(TRANSPOSED, TRANSPOSED)
