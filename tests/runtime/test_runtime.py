"""The runtime a model is loaded with: one object that says what runs and why, a key that names what
measurements depend on (never a timing), and the one found again for a model loaded by bita."""

from dataclasses import replace

import torch
from conftest import planned_tiny, tiny_model

from bita.runtime.build import make_runtime, prepare
from bita.runtime.invariance import Invariance
from bita.runtime.kernel_plan import STOCK, KernelPlan
from bita.runtime.runtime import runtime_of


def test_the_key_names_device_dtype_forward_and_plan_and_no_timing():
    runtime = planned_tiny("llama", torch.float32)
    timed = replace(runtime, dtype_reason="row-invariant, faster (float32 33.1 / 35.0 ms at 1 / 8 rows)")
    assert timed.key == runtime.key and "ms" not in runtime.key
    assert runtime.key.startswith("cpu (") and f"|float32|{runtime.forward.kind}|linears layers" in runtime.key
    assert "33.1" in timed.describe() and timed.describe().startswith("lean forward, static KV cache")
    assert "; linears layers" in timed.describe()
    other = planned_tiny("gemma3", torch.float32)
    assert other.forward.kind == "transformers+exact" and "|transformers+exact|" in other.key
    stock = prepare(tiny_model("llama"), "stock")
    assert stock.plan is None and stock.key.endswith("|transformers|stock linears")
    assert runtime_of(stock.model).key == stock.key  # not registered: transformers' forward as it is


def test_identity_is_claimed_where_fp32_or_proved_and_the_probe_is_described():
    runtime = prepare(tiny_model("llama"), "auto", plan=KernelPlan(STOCK, STOCK))
    assert runtime.exact and runtime.invariance is None and "passes" not in runtime.describe()
    half = prepare(tiny_model("llama").to(torch.bfloat16), "auto", plan=KernelPlan(STOCK, STOCK))
    assert not half.exact
    failed = replace(half, invariance=Invariance(40, 2, 0.125, {"prefill": 0, "8": 2}))
    assert not failed.exact and "passes not row-invariant: 2 of 40 rows" in failed.describe()


def test_a_loaded_runtime_is_found_for_its_model_and_probed(tmp_path):
    model = tiny_model("qwen2")
    runtime = make_runtime(model, "auto", False, "asked for", tmp_path)
    assert runtime_of(model) is runtime and runtime.forward.kind.startswith("lean")
    assert runtime.invariance is not None and runtime.invariance.holds and runtime.exact
    assert "float32: asked for" in runtime.describe() and "passes row-invariant" in runtime.describe()
    assert {p.name for p in tmp_path.iterdir()} >= {"machine-profile.json"}  # one profile (and its lock file)
    assert not {p.name for p in tmp_path.iterdir()} - {"machine-profile.json", "machine-profile.json.lock"}


def test_a_dropped_model_is_freed_with_its_runtime(tmp_path):
    """The model holds its runtime (and the runtime its model): nothing else keeps either, so a process that
    loads model after model (the CLI in a test run, an app switching models) does not keep them all."""
    import gc
    import weakref

    model = tiny_model("llama")
    runtime_of_model = make_runtime(model, "auto", False, "asked for", tmp_path)
    assert runtime_of(model) is runtime_of_model
    alive = weakref.ref(model)
    del model, runtime_of_model
    gc.collect()
    assert alive() is None
