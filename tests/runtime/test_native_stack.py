"""native_stack.c: a lean forward's whole decoder stack in one native call a pass, bitwise what the layers' native
kernels give when Python calls them one by one (LeanLlama.run_layers), the cache written alike."""

import pytest
import torch
from conftest import COMMON, forget_native, tiny_model, tree_allowed
from transformers import AutoModelForCausalLM, LlamaConfig

from bita.runtime import native
from bita.runtime.kernel_plan import AMX, DOT, NATIVE, TRANSPOSED, KernelPlan
from bita.runtime.lean_llama import LEAN_TYPES, LeanLlama
from bita.runtime.native_stack import NativeStack


def model_of(arch: str) -> torch.nn.Module:
    """A tiny model of ``arch``, or "llama-biases": a tiny Llama with a bias on every product."""
    if arch != "llama-biases":
        return tiny_model(arch)
    torch.manual_seed(0)
    config = LlamaConfig(**COMMON, attention_bias=True, mlp_bias=True, initializer_range=0.2)
    model = AutoModelForCausalLM.from_config(config).eval().requires_grad_(False)
    for name, parameter in model.named_parameters():
        if name.endswith("bias"):
            parameter.normal_(0, 0.2)
    return model


def load_build(march: str, monkeypatch, folder) -> None:
    """This process on the native library built with ``-march=march`` in ``folder`` ("native": the one it has), as
    a machine of that kind runs it; put back after the test."""
    if march == "native":
        return
    if march == "haswell" and "avx2" not in native.cpu_info().get("flags", "").split():
        pytest.skip("no AVX2 here")
    forget_native(monkeypatch, march)
    native.unavailable(folder)


def lean_on(arch: str, dtype: torch.dtype, kernel: str) -> LeanLlama:
    why = {AMX: native.amx_unavailable, DOT: native.dot_unavailable}.get(kernel, native.unavailable)()
    if why:
        pytest.skip(why)
    if kernel != NATIVE and dtype != torch.bfloat16:
        pytest.skip(f"the {kernel} kernel takes bf16 only")
    return LeanLlama(model_of(arch).to(dtype), KernelPlan(kernel, kernel))


@pytest.mark.parametrize("march", ["native", "haswell"])
@pytest.mark.parametrize("kernel", [NATIVE, DOT, AMX])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=["bf16", "fp32"])
@pytest.mark.parametrize("arch", [*LEAN_TYPES, "llama-biases"])
def test_the_stack_in_one_call_is_the_layers_called_one_by_one(arch, dtype, kernel, march, monkeypatch,
                                                               tmp_path_factory):
    """A prompt, then passes of 1..20 rows under tree masks after 0..~45 cached slots: the same hidden states and the
    same cache, bit for bit; in this machine's build and in the AVX2 one (whose library holds no AMX or dot kernel:
    the stack's references to them stay unresolved)."""
    load_build(march, monkeypatch, tmp_path_factory.getbasetemp() / f"native-{march}")
    lean = lean_on(arch, dtype, kernel)
    stack = lean.stack
    assert stack is not None and stack.kernel == native.KERNELS[kernel].stack
    generator = torch.Generator().manual_seed(1)
    caches = {way: lean.new_cache(rows=64) for way in ("stack", "python")}
    cached = 0
    for rows in (17, 1, 4, 20, 2):
        embeds = lean.input_embeddings(torch.randint(3, 500, (rows,), generator=generator))
        allowed = tree_allowed(rows, cached, generator)
        positions = torch.arange(cached, cached + rows)
        hidden = {}
        for way, cache in caches.items():
            lean.stack = stack if way == "stack" else None
            hidden[way] = lean.forward(cache, embeds, positions, allowed, rows)
        assert torch.equal(hidden["stack"], hidden["python"])
        assert torch.equal(caches["stack"].kv, caches["python"].kv)
        cached += rows


def test_a_stack_is_made_only_where_every_product_is_native():
    """Another path for the products, or torch's attention: no stack (run_layers' Python calls run)."""
    if native.unavailable():
        pytest.skip(native.unavailable())
    model = tiny_model("llama")
    assert LeanLlama(model, KernelPlan(TRANSPOSED, TRANSPOSED)).stack is None
    assert LeanLlama(model).stack is None  # transformers' own kernels
    lean = LeanLlama(model, KernelPlan(NATIVE, NATIVE))
    lean.native = False
    assert NativeStack.of(lean) is None


def test_the_stack_refuses_what_it_cannot_take():
    """Rows of another dtype, a mask wider than the cache, a cache without room: a ValueError, nothing written."""
    lean = lean_on("llama", torch.float32, NATIVE)
    cache = lean.new_cache(rows=8)
    before = cache.kv.clone()
    rows = torch.zeros(2, 64)
    lean.grow_rotary(2)
    cos, sin = lean.rotary_rows(torch.arange(2))
    misuses = {"dtype": (rows.to(torch.bfloat16), torch.ones(2, 2, dtype=torch.bool)),
               "mask": (rows, torch.ones(2, cache.capacity + 1, dtype=torch.bool)),
               "mask dtype": (rows, torch.ones(2, 2))}
    for name, (x, allowed) in misuses.items():
        with pytest.raises(ValueError, match="NativeStack.run"):
            lean.stack.run(x, cos, sin, allowed, cache)
    cache.length = cache.capacity - 1
    with pytest.raises(ValueError, match="more slots"):
        lean.stack.run(rows, cos, sin, torch.ones(2, 2, dtype=torch.bool), cache)
    assert torch.equal(cache.kv, before)
