"""``--dtype auto`` on a CPU: bf16 measured against fp32 wherever bf16 can run fast (bf16 hardware, or the native
kernels widening bf16 weights on AVX2 alone), taken only where its passes are proved row-invariant and it is faster;
measured once into the machine profile. The CPU kinds are stood in for, so every path runs on every CPU."""

import pytest
import torch
from conftest import tiny_model

from bita.runtime import native, precision
from bita.runtime.build import prepare
from bita.runtime.measured import read_entries
from bita.runtime.precision import choose_cpu_dtype


def stand_in_timings(monkeypatch, float32_ms: float, bfloat16_ms: float) -> list:
    timed = []

    def pass_milliseconds(runtime):
        timed.append(runtime.dtype)
        ms = bfloat16_ms if runtime.dtype == torch.bfloat16 else float32_ms
        return {"1 rows": ms, "8 rows": 1.2 * ms}

    monkeypatch.setattr(precision, "pass_milliseconds", pass_milliseconds)
    return timed


def prepared(candidate):
    return prepare(candidate, "auto", lean=True)


@pytest.mark.parametrize("hardware", [True, False], ids=["bf16-hardware", "avx2-alone"])
def test_bf16_is_measured_on_every_cpu_with_native_kernels_and_taken_where_faster(monkeypatch, tmp_path, hardware):
    if native.unavailable() is not None:
        pytest.skip(native.unavailable())
    monkeypatch.setattr(precision, "bf16_hardware", lambda: hardware)
    timed = stand_in_timings(monkeypatch, float32_ms=40.0, bfloat16_ms=17.0)  # a Zen 3's AR pass, AVX2 alone
    profile = tmp_path / "profile.json"
    runtime, choice = choose_cpu_dtype(tiny_model("llama"), prepared, profile)
    assert choice.dtype == "bfloat16" and runtime.dtype == torch.bfloat16 and "faster" in choice.reason
    assert ("bf16 hardware" in choice.reason) == hardware and sorted(map(str, timed)) == ["torch.bfloat16",
                                                                                         "torch.float32"]
    again, choice_again = choose_cpu_dtype(tiny_model("llama"), prepared, profile)
    assert choice_again == choice and len(timed) == 2  # measured once: read from the profile after
    assert {entry["what"] for entry in read_entries(profile)[0].values()} >= {"dtype choice", "row-invariance probe"}


@pytest.mark.parametrize("hardware", [True, False], ids=["bf16-hardware", "avx2-alone"])
@pytest.mark.parametrize("float32_ms,bfloat16_ms", [(20.0, 19.5), (20.0, 17.5), (17.5, 20.0)])
def test_within_the_margin_the_cpus_rule_decides_not_the_clock(monkeypatch, tmp_path, hardware, float32_ms,
                                                               bfloat16_ms):
    """Two fresh caches of one machine timed 9.8 / 26.3 ms against 10.4 / 28.9 and the reverse: a 6 % difference
    must not flip the arithmetic (the tokens): within 15 % bf16 where the CPU has bf16 products, else float32."""
    if native.unavailable() is not None:
        pytest.skip(native.unavailable())
    monkeypatch.setattr(precision, "bf16_hardware", lambda: hardware)
    stand_in_timings(monkeypatch, float32_ms=float32_ms, bfloat16_ms=bfloat16_ms)
    _, choice = choose_cpu_dtype(tiny_model("llama"), prepared, tmp_path / "profile.json")
    assert choice.dtype == ("bfloat16" if hardware else "float32") and "the rule" in choice.reason


def test_fp32_stays_where_bf16_is_slower_or_cannot_run_fast(monkeypatch, tmp_path):
    stand_in_timings(monkeypatch, float32_ms=20.0, bfloat16_ms=30.0)
    if native.unavailable() is None:
        _, choice = choose_cpu_dtype(tiny_model("llama"), prepared, tmp_path / "profile.json")
        assert choice.dtype == "float32" and "slower" in choice.reason
    monkeypatch.setattr(precision, "bf16_hardware", lambda: False)
    monkeypatch.setattr(native, "unavailable", lambda directory=None: "no compiler here")
    runtime, choice = choose_cpu_dtype(tiny_model("llama"), prepared, tmp_path / "other.json")
    assert choice.dtype == "float32" and runtime.dtype == torch.float32 and "no native kernels" in choice.reason
