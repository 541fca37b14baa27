"""The native library's bf16-only linear kernels, each on its own: the AMX path (native_amx.c) and the dot path
(native_linear.c's tiles summed by vdpbf16ps). A row's result is bitwise the same in a pass of any number of rows and
at any place in it (with bias and residual, N and K off the tiles), close to a float64 reference; the wrappers refuse
what the C code cannot take; the kernel plan offers and prices the path; and greedy BiTA on a tiny bf16 model with
every linear on it emits our AR loop's tokens. The dot path is also bitwise the native path where nothing is
subnormal. Each kernel's tests are skipped where this CPU or build lacks it (AMX-BF16, AVX512-BF16)."""

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
from bita.runtime.kernel_plan import AMX, DOT, NATIVE, KernelPlan, products_of, row_floor, weight_copy

ROW_COUNTS = range(1, 41)
SHAPES = ((70, 37), (96, 64), (33, 130), (16, 32))  # [out, in]: partial blocks and chunks, whole ones, one tile


@pytest.fixture(params=[AMX, DOT])
def kernel(request) -> str:
    """A bf16-only kernel of the native library, skipped where it cannot run here."""
    why = {AMX: native.amx_unavailable, DOT: native.dot_unavailable}[request.param]()
    if why is not None:
        pytest.skip(why)
    return request.param


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
def test_a_rows_result_is_the_same_alone_and_among_others_and_close_to_float64(kernel, shape, with_bias,
                                                                              with_residual):
    """Each row alone (one thread) against every pass of 1..40 rows (two threads) holding it at varying places."""
    weight, bias, x, residual = _case(shape, seed=sum(shape))
    bias, residual = bias if with_bias else None, residual if with_residual else None
    packed, out_features = native.pack(weight, kernel), shape[0]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        alone = torch.cat([native.linear(x[i:i + 1], packed, bias, out_features,
                                         residual[i:i + 1] if residual is not None else None, kernel)
                           for i in range(len(x))])
    finally:
        torch.set_num_threads(threads)
    for rows in ROW_COUNTS:
        for start in {0, (7 * rows) % (len(x) - rows + 1), len(x) - rows}:
            got = native.linear(x[start:start + rows], packed, bias, out_features,
                                residual[start:start + rows] if residual is not None else None, kernel)
            assert torch.equal(_bits(got), _bits(alone[start:start + rows])), \
                f"{rows} rows from row {start}: a row differs from itself computed alone"
    product = F.linear(x.double(), weight.double(), bias.double() if bias is not None else None)
    tolerance = 2e-2
    if residual is None:
        torch.testing.assert_close(alone.double(), product, atol=tolerance, rtol=tolerance)
    else:  # the product rounded to bf16, then added (as torch adds them)
        unrounded = native.linear(x, packed, bias, out_features, None, kernel)
        assert torch.equal(_bits(alone), _bits(residual + unrounded))
        torch.testing.assert_close(unrounded.double(), product, atol=tolerance, rtol=tolerance)


def test_the_dot_path_is_the_native_path_bitwise_where_nothing_is_subnormal():
    """One vdpbf16ps a pair of products, odd k first, each product added and rounded once, is what the native path's
    two float32 FMAs do (docs/method.md); shapes off the tiles and pairs, with bias and residual, 1 to 40 rows."""
    if native.dot_unavailable() is not None:
        pytest.skip(native.dot_unavailable())
    for shape in SHAPES:
        weight, bias, x, residual = _case(shape, seed=7 + sum(shape))
        out_features, packed = shape[0], {path: native.pack(weight, path) for path in (NATIVE, DOT)}
        for rows in (1, 3, 12, 13, 40):
            got = {path: native.linear(x[:rows], copy, bias, out_features, residual[:rows], path)
                   for path, copy in packed.items()}
            assert torch.equal(_bits(got[DOT]), _bits(got[NATIVE])), f"{shape}, {rows} rows"


def test_the_plan_measures_floor_1_and_zero_rows_give_an_empty_output(kernel):
    generator = torch.Generator().manual_seed(0)
    weight = torch.randn(200, 576, generator=generator).bfloat16()
    copy = weight_copy(kernel, weight)
    assert row_floor(kernel, weight, None, copy) == 1
    assert native.linear(torch.empty(0, 576, dtype=torch.bfloat16), copy, None, 200, None, kernel).shape == (0, 200)


def test_the_wrappers_refuse_what_the_kernel_cannot_take(kernel):
    weight = torch.randn(40, 40).bfloat16()
    packed = native.pack(weight, kernel)
    assert native.pack(weight.float(), kernel) is None  # bf16 only: the plan offers no such path for float32
    with pytest.raises(ValueError, match="weight"):
        native.pack(weight[None], kernel)
    x = torch.randn(3, 40).bfloat16()
    misuses = [
        (x.float(), packed, None, None),  # float32 x
        (x, native.pack(torch.randn(40, 72).bfloat16(), kernel), None, None),  # another weight's copy
        (x, packed[:-1], None, None),
        (x, packed, torch.zeros(39), None),
        (x, packed, None, torch.zeros(3, 40)),  # float32 residual
        (x, packed, None, torch.zeros(40, 3).bfloat16().t()),  # not contiguous
    ]
    for inputs, copy, bias, residual in misuses:
        with pytest.raises(ValueError):
            native.linear(inputs, copy, bias, 40, residual, kernel)


def test_the_plan_offers_it_for_bf16_prices_it_padded_and_can_choose_it(kernel):
    layers, head = products_of([nn.Linear(32, 64).bfloat16()]), products_of([nn.Linear(32, 100).bfloat16()])[0]
    assert kernel in kernel_plan.offered_paths(layers[0][0])
    assert kernel not in kernel_plan.offered_paths(layers[0][0].float())
    times = kernel_plan.kernel_times(layers, head, (kernel_plan.STOCK, kernel), rows=(1, 4, 8, 16), repeats=1)
    assert times["floors"] == {"layers": {kernel_plan.STOCK: times["floors"]["layers"][kernel_plan.STOCK], kernel: 1},
                               "head": {kernel_plan.STOCK: times["floors"]["head"][kernel_plan.STOCK], kernel: 1}}
    fastest = [{kernel_plan.STOCK: 1.0, kernel: 0.5}] * len(kernel_plan.TIMED_ROWS)
    table = {"rows": list(kernel_plan.TIMED_ROWS), "layers": fastest, "head": fastest}
    assert kernel_plan.plan_from(table) == KernelPlan(kernel, kernel)


@pytest.mark.parametrize("lean", [True, False], ids=["lean", "transformers"])
def test_greedy_bita_on_the_path_emits_our_ar_loops_tokens(kernel, lean, one_thread):
    """A tiny bf16 llama with every linear on the kernel: the probe finds every verification row bitwise the AR row, and
    BiTA's tree passes emit our AR loop's tokens (bf16 logits of a random model are full of near ties)."""
    runtime = planned_tiny("llama", torch.bfloat16, lean, path=kernel)
    found = probe_row_invariance(runtime)
    assert found.holds and found.worst == 0.0, found.describe()
    adapter = BitaAdapter.create(runtime.model, prompt_tokens=4, mask_tokens=3, seed=1)
    for spec in ("efficient:3,2,2", "dynamic:12"):
        for prompt in random_prompts(2, seed=5):
            reference = [t for r in ar_steps(runtime, prompt, StopCondition(24)) for t in r.emitted]
            steps = bita_steps(Decoding(runtime, adapter, tree_of(spec), chains=Chains(ngram_tokens=3)), prompt,
                               StopCondition(24))
            assert [t for r in steps for t in r.emitted] == reference
