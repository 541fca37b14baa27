"""Where a half-precision BiTA output parts from AR's, and whether that was a near tie."""

import pytest
import torch
from conftest import random_prompts, tiny_model

from bita.bench.divergence import Divergence, divergence, first_difference
from bita.decode.autoregressive import ar_steps
from bita.decode.stopping import StopCondition
from bita.model.loading import LoadedModel
from bita.runtime.invariance import Invariance
from bita.runtime.runtime import runtime_of


def test_first_difference():
    assert first_difference([1, 2, 3], [1, 2, 3]) is None
    assert first_difference([1, 2, 3], [1, 5, 3]) == 1
    assert first_difference([1, 2], [1, 2, 3]) == 2


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_divergence_reports_the_references_top2_gap_there(dtype):
    model = tiny_model("llama").to(dtype)
    loaded = LoadedModel(model, None, "tiny", runtime_of(model))
    prompt = random_prompts(1, seed=3)[0]
    reference = [t for r in ar_steps(loaded.runtime, prompt, StopCondition(12)) for t in r.emitted]
    assert divergence(loaded, prompt, reference, reference) is None
    wrong = reference[:5] + [(reference[5] + 1) % 512] + reference[6:]
    parted = divergence(loaded, prompt, wrong, reference)
    with torch.inference_mode():
        logits = model(torch.tensor([prompt + reference[:5]])).logits[0, -1].float()
    top = logits.topk(2).values
    assert parted.position == 5 and parted.gap == pytest.approx(float(top[0] - top[1]), rel=1e-2, abs=1e-2)
    assert parted.rounding == pytest.approx(4 * float(top[0].abs()) * torch.finfo(dtype).eps, rel=1e-2)
    assert Divergence(0, 0.01, 0.02).near_tie and not Divergence(0, 0.5, 0.02).near_tie


def test_identity_is_claimed_only_in_fp32_without_k_bit_weights():
    from dataclasses import replace

    from bita.serve.reports import introduction

    model = tiny_model("llama")
    loaded = LoadedModel(model, None, "tiny", runtime_of(model))
    assert loaded.exact
    model.hf_quantizer = object()  # what transformers sets on a bitsandbytes-quantised model
    assert not loaded.exact and "k-bit" in loaded.runtime.key
    del model.hf_quantizer
    half = runtime_of(tiny_model("llama").to(torch.bfloat16))
    assert not LoadedModel(half.model, None, "tiny", half).exact
    proved = replace(half, invariance=Invariance(rows=32, differing=0, worst=0.0, by_pass={"2": 0}))
    assert LoadedModel(half.model, None, "tiny", proved).exact  # bf16 whose passes the probe proved row-invariant
    failed = replace(half, invariance=Invariance(rows=32, differing=1, worst=0.5, by_pass={"2": 1}))
    assert not LoadedModel(half.model, None, "tiny", failed).exact
    assert "token-for-token" in introduction("m", "cpu", exact=True)
    half = introduction("m", "cuda", exact=False)
    assert "token-for-token" not in half and "near tie" in half and "fp32 is the lossless mode" in half
