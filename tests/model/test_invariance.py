"""Row-invariant passes on tiny models of every lean family, in bf16 and fp32: the probe finds every
verification row's logits bitwise equal to our AR loop's, greedy BiTA emits our AR loop's tokens, and a
deliberately row-dependent kernel is caught."""

import pytest
import torch
from conftest import random_prompts, tiny_model, tree_of

from bita.decode.autoregressive import ar_steps
from bita.decode.step import bita_steps
from bita.decode.stopping import StopCondition
from bita.model.adapter import BitaAdapter
from bita.model.invariance import PROBE_BUCKETS, probe_row_invariance
from bita.model.kernel_plan import PACKED, ROW_BUCKETS, STOCK, KernelPlan, pack
from bita.model.kernels import apply_kernels
from bita.model.lean_llama import LEAN_TYPES, FusedLinear, attach_lean, lean_of
from bita.model.precision import bf16_hardware

DTYPES = [pytest.param(torch.bfloat16, marks=pytest.mark.skipif(
    not bf16_hardware(), reason="no bf16 hardware: --dtype auto keeps fp32 on this CPU")), torch.float32]


def lean_tiny(arch: str, dtype: torch.dtype):
    """A tiny model in ``dtype`` on the lean forward, every linear on one path (oneDNN's packed where
    this CPU packs that dtype), as a measured plan would have it."""
    model = tiny_model(arch).to(dtype)
    path = PACKED if pack(torch.zeros(8, 8, dtype=dtype)) is not None else STOCK
    apply_kernels(model, "auto", plan=KernelPlan((path,) * len(ROW_BUCKETS), (path,) * len(ROW_BUCKETS)))
    assert attach_lean(model)
    return model


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("arch", LEAN_TYPES)
def test_the_probe_finds_every_verification_row_bitwise_equal_to_ar(arch, dtype, one_thread):
    model = lean_tiny(arch, dtype)
    found = probe_row_invariance(model, lean_of(model))
    assert found.holds, found.describe()
    assert list(found.by_pass) == ["prefill"] + [str(b) for b in PROBE_BUCKETS]
    assert found.rows >= 30 and found.worst == 0.0


@pytest.mark.parametrize("spec", ["efficient:3,2,2", "chain:1", "full:2,2,2/chain-groups", "dynamic:12", ""])
@pytest.mark.parametrize("arch", LEAN_TYPES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_greedy_bita_emits_our_ar_loops_tokens_in_the_same_dtype(arch, spec, dtype, one_thread):
    """bf16 logits of a tiny random model are full of near ties: any rounding difference between a tree
    row and an AR row would show."""
    model = lean_tiny(arch, dtype)
    adapter = BitaAdapter.create(model, prompt_tokens=4, mask_tokens=3, seed=1)
    for prompt in random_prompts(3, seed=5, high=90):
        reference = [t for r in ar_steps(model, prompt, StopCondition(24)) for t in r.emitted]
        steps = bita_steps(model, adapter, prompt, tree_of(spec), StopCondition(24), ngram_tokens=3)
        assert [t for r in steps for t in r.emitted] == reference


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_row_dependent_kernel_is_caught(monkeypatch, dtype, one_thread):
    """A linear whose result moves with the pass's row count (as a kernel choosing another path for
    more rows would) fails the probe."""
    model = lean_tiny("llama", dtype)
    assert probe_row_invariance(model, lean_of(model)).holds
    call = FusedLinear.__call__

    def row_dependent(self, x, bucket):
        out = call(self, x, bucket)
        return out + 1e-2 * (x.shape[0] > 4)

    monkeypatch.setattr(FusedLinear, "__call__", row_dependent)
    found = probe_row_invariance(model, lean_of(model))
    assert not found.holds and found.by_pass["prefill"] == 0 and found.by_pass["8"] > 0
    assert "not row-invariant" in found.describe()
