"""Row-invariant passes on tiny models of every family, in bf16 and fp32, on both forwards (the lean one,
and transformers' path with our attention: Gemma 2/3 with soft-capping and interleaved windows, Qwen3,
windowed Mistral and Qwen2, and a lean family on transformers' path too): the probe finds every
verification row's logits bitwise equal to our AR loop's, greedy BiTA emits our AR loop's tokens past
the windows, and a deliberately row-dependent kernel is caught on each forward."""

import pytest
import torch
from conftest import WINDOW, WINDOWED_CONFIGS, planned_tiny, random_prompts, tree_of

from bita.decode.autoregressive import ar_steps
from bita.decode.step import Chains, Decoding, bita_steps
from bita.decode.stopping import StopCondition
from bita.model.adapter import BitaAdapter
from bita.runtime import kernel_plan
from bita.runtime.hf_attention import our_attention, use_exact_attention
from bita.runtime.invariance import PASS_ROWS, probe_row_invariance
from bita.runtime.lean_llama import LEAN_TYPES
from bita.runtime.runtime import Runtime
from bita.runtime.transformers_forward import TransformersForward

DTYPES = [torch.bfloat16, torch.float32]  # --dtype auto may take either on any CPU (precision.py)
# (family, runs on the lean forward): every lean family on it, the others and llama on transformers' path
FORWARDS = [(arch, True) for arch in LEAN_TYPES] + [(arch, False) for arch in sorted(WINDOWED_CONFIGS) + ["llama"]]
FORWARD_IDS = [f"{arch}-{'lean' if lean else 'transformers'}" for arch, lean in FORWARDS]


def planned(arch: str, lean: bool, dtype: torch.dtype) -> Runtime:
    runtime = planned_tiny(arch, dtype, lean)
    assert runtime.forward.kind.startswith("lean") if lean else runtime.forward.kind == "transformers+exact"
    assert runtime.forward.exact_rows
    return runtime


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("arch,lean", FORWARDS, ids=FORWARD_IDS)
def test_the_probe_finds_every_verification_row_bitwise_equal_to_ar(arch, lean, dtype, one_thread):
    found = probe_row_invariance(planned(arch, lean, dtype))
    assert found.holds, found.describe()
    assert list(found.by_pass) == ["prefill"] + [str(b) for b in PASS_ROWS]
    assert found.rows >= 30 and found.worst == 0.0


@pytest.mark.parametrize("spec", ["efficient:3,2,2", "chain:1", "full:2,2,2/chain-groups", "dynamic:12", ""])
@pytest.mark.parametrize("arch,lean", FORWARDS, ids=FORWARD_IDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_greedy_bita_emits_our_ar_loops_tokens_in_the_same_dtype(arch, lean, spec, dtype, one_thread):
    """bf16 logits of a tiny random model are full of near ties: any rounding difference between a tree
    row and an AR row would show. Prompts from shorter than the window to four windows long."""
    runtime = planned(arch, lean, dtype)
    adapter = BitaAdapter.create(runtime.model, prompt_tokens=4, mask_tokens=3, seed=1)
    decoding = Decoding(runtime, adapter, tree_of(spec), chains=Chains(ngram_tokens=3))
    for prompt in random_prompts(3, seed=5, low=WINDOW - 3, high=4 * WINDOW):
        reference = [t for r in ar_steps(runtime, prompt, StopCondition(24)) for t in r.emitted]
        steps = bita_steps(decoding, prompt, StopCondition(24))
        assert [t for r in steps for t in r.emitted] == reference


def row_dependent(call):
    """``call`` (a linear path), its output moved when the pass has more than 4 rows (as a kernel choosing
    another path for more rows would)."""
    def moved(*args):
        out = call(*args)
        rows = out.numel() // out.shape[-1]
        return out + 1e-2 * (rows > 4)
    return moved


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("arch,lean", [("llama", True), ("gemma3", False)])
def test_a_row_dependent_kernel_is_caught(monkeypatch, arch, lean, dtype, one_thread):
    runtime = planned(arch, lean, dtype)
    assert probe_row_invariance(runtime).holds
    monkeypatch.setattr(kernel_plan, "run_path", row_dependent(kernel_plan.run_path))  # every planned linear's
    found = probe_row_invariance(runtime)
    assert not found.holds and found.by_pass["prefill"] == 0 and found.by_pass["8"] > 0
    assert "not row-invariant" in found.describe()


@pytest.mark.parametrize("dtype", DTYPES)
def test_transformers_stock_attention_is_what_breaks_invariance(dtype, one_thread):
    """The same planned Gemma 3 with transformers' SDPA instead of ours: a one-row call takes another path
    than a call of several rows, masked slots change how keys are split, and the probe sees it."""
    runtime = planned("gemma3", False, dtype)
    use_exact_attention(runtime.model, False)
    assert not our_attention(runtime.model)
    stock = Runtime(runtime.model, TransformersForward(runtime.model, exact=False), plan=runtime.plan)
    assert not probe_row_invariance(stock).holds
