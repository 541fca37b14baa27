"""native_amx.c, the AMX path: a row's result is bitwise the same in a pass of any number of rows and at any place in
it (with bias and residual, N and K off the tiles), close to a float64 reference; the wrappers refuse what the C
code cannot take; the kernel plan offers and prices the path; and greedy BiTA on a tiny bf16 model with every linear
on it emits our AR loop's tokens. Skipped where this CPU or build has no AMX."""

import pytest
import torch
import torch.nn.functional as F
from conftest import planned_tiny, random_prompts, tree_of
from torch import nn

from bita.decode.autoregressive import ar_steps
from bita.decode.step import Chains, Decoding, bita_steps
from bita.decode.stopping import StopCondition
from bita.model.adapter import BitaAdapter
from bita.runtime import kernel_plan, native
from bita.runtime.invariance import probe_row_invariance
from bita.runtime.kernel_plan import AMX, KernelPlan, products_of, row_floor, weight_copy

pytestmark = pytest.mark.skipif(native.amx_unavailable() is not None, reason=str(native.amx_unavailable()))
ROW_COUNTS = range(1, 41)
SHAPES = ((70, 37), (96, 64), (33, 130), (16, 32))  # [out, in]: partial blocks and chunks, whole ones, one tile


def _case(shape: tuple[int, int], seed: int):
    generator = torch.Generator().manual_seed(seed)
    out_features, columns = shape
    weight = (torch.randn(out_features, columns, generator=generator) / columns ** 0.5).bfloat16()
    bias = torch.randn(out_features, generator=generator)
    x = torch.randn(max(ROW_COUNTS), columns, generator=generator).bfloat16()
    residual = torch.randn(max(ROW_COUNTS), out_features, generator=generator).bfloat16()
    return weight, bias, x, residual


def _bits(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.view(torch.int16)


@pytest.mark.parametrize("shape", SHAPES, ids=[f"{n}x{k}" for n, k in SHAPES])
@pytest.mark.parametrize("with_bias", [False, True], ids=["", "bias"])
@pytest.mark.parametrize("with_residual", [False, True], ids=["", "residual"])
def test_a_rows_result_is_the_same_alone_and_among_others_and_close_to_float64(shape, with_bias, with_residual):
    """Each row alone (one thread) against every pass of 1..40 rows (two threads) holding it at varying places."""
    weight, bias, x, residual = _case(shape, seed=sum(shape))
    bias, residual = bias if with_bias else None, residual if with_residual else None
    packed, out_features = native.pack(weight, AMX), shape[0]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        alone = torch.cat([native.linear(x[i:i + 1], packed, bias, out_features,
                                         residual[i:i + 1] if residual is not None else None, AMX)
                           for i in range(len(x))])
    finally:
        torch.set_num_threads(threads)
    for rows in ROW_COUNTS:
        for start in {0, (7 * rows) % (len(x) - rows + 1), len(x) - rows}:
            got = native.linear(x[start:start + rows], packed, bias, out_features,
                                residual[start:start + rows] if residual is not None else None, AMX)
            assert torch.equal(_bits(got), _bits(alone[start:start + rows])), \
                f"{rows} rows from row {start}: a row differs from itself computed alone"
    product = F.linear(x.double(), weight.double(), bias.double() if bias is not None else None)
    tolerance = 2e-2
    if residual is None:
        torch.testing.assert_close(alone.double(), product, atol=tolerance, rtol=tolerance)
    else:  # the product rounded to bf16, then added (as torch adds them)
        unrounded = native.linear(x, packed, bias, out_features, None, AMX)
        assert torch.equal(_bits(alone), _bits(residual + unrounded))
        torch.testing.assert_close(unrounded.double(), product, atol=tolerance, rtol=tolerance)


def test_the_plan_measures_floor_1_and_zero_rows_give_an_empty_output():
    generator = torch.Generator().manual_seed(0)
    weight = torch.randn(200, 576, generator=generator).bfloat16()
    copy = weight_copy(AMX, weight)
    assert row_floor(AMX, weight, None, copy) == 1
    assert native.linear(torch.empty(0, 576, dtype=torch.bfloat16), copy, None, 200, None, AMX).shape == (0, 200)


def test_the_wrappers_refuse_what_the_kernel_cannot_take():
    weight = torch.randn(40, 40).bfloat16()
    packed = native.pack(weight, AMX)
    assert native.pack(weight.float(), AMX) is None  # bf16 only: the plan offers no AMX path for float32
    with pytest.raises(ValueError, match="weight"):
        native.pack(weight[None], AMX)
    x = torch.randn(3, 40).bfloat16()
    misuses = [
        (x.float(), packed, None, None),  # float32 x
        (x, native.pack(weight), None, None),  # the native path's tiles (another size), not AMX blocks
        (x, packed[:-1], None, None),
        (x, packed, torch.zeros(39), None),
        (x, packed, None, torch.zeros(3, 40)),  # float32 residual
        (x, packed, None, torch.zeros(40, 3).bfloat16().t()),  # not contiguous
    ]
    for inputs, copy, bias, residual in misuses:
        with pytest.raises(ValueError):
            native.linear(inputs, copy, bias, 40, residual, AMX)


def test_the_plan_offers_it_for_bf16_prices_it_padded_and_can_choose_it():
    layers, head = products_of([nn.Linear(32, 64).bfloat16()]), products_of([nn.Linear(32, 100).bfloat16()])[0]
    assert AMX in kernel_plan.offered_paths(layers[0][0])
    assert AMX not in kernel_plan.offered_paths(layers[0][0].float())
    times = kernel_plan.kernel_times(layers, head, (kernel_plan.STOCK, AMX), rows=(1, 4, 8, 16), repeats=1)
    assert times["floors"] == {"layers": {kernel_plan.STOCK: times["floors"]["layers"][kernel_plan.STOCK], AMX: 1},
                               "head": {kernel_plan.STOCK: times["floors"]["head"][kernel_plan.STOCK], AMX: 1}}
    fastest = [{kernel_plan.STOCK: 1.0, AMX: 0.5}] * len(kernel_plan.TIMED_ROWS)
    table = {"rows": list(kernel_plan.TIMED_ROWS), "layers": fastest, "head": fastest}
    assert kernel_plan.plan_from(table) == KernelPlan(AMX, AMX)


@pytest.mark.parametrize("lean", [True, False], ids=["lean", "transformers"])
def test_greedy_bita_on_the_amx_path_emits_our_ar_loops_tokens(lean, one_thread):
    """A tiny bf16 llama with every linear on AMX: the probe finds every verification row bitwise the AR row, and
    BiTA's tree passes emit our AR loop's tokens (bf16 logits of a random model are full of near ties)."""
    runtime = planned_tiny("llama", torch.bfloat16, lean, path=AMX)
    found = probe_row_invariance(runtime)
    assert found.holds and found.worst == 0.0, found.describe()
    adapter = BitaAdapter.create(runtime.model, prompt_tokens=4, mask_tokens=3, seed=1)
    for spec in ("efficient:3,2,2", "dynamic:12"):
        for prompt in random_prompts(2, seed=5):
            reference = [t for r in ar_steps(runtime, prompt, StopCondition(24)) for t in r.emitted]
            steps = bita_steps(Decoding(runtime, adapter, tree_of(spec), chains=Chains(ngram_tokens=3)), prompt,
                               StopCondition(24))
            assert [t for r in steps for t in r.emitted] == reference
