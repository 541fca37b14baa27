"""The lean Llama-family forward: transformers' logits, lossless BiTA and AR on it, its static cache,
and transformers' path kept for what it does not support."""

import pytest
import torch
from conftest import TINY_CONFIGS, assert_lossless, random_prompts, tiny_model, tree_allowed
from transformers import AutoModelForCausalLM, DynamicCache

from bita.decode.step import new_cache
from bita.runtime import native
from bita.runtime.build import prepare
from bita.runtime.kernel_plan import PACKED, TRANSPOSED, KernelPlan
from bita.runtime.layer_masks import additive_mask
from bita.runtime.lean_llama import LEAN_TYPES, LeanLlama, lean_unsupported
from bita.runtime.runtime import Runtime
from bita.runtime.static_kv import StaticKV
from bita.runtime.transformers_forward import TransformersKV

MIXED = KernelPlan(TRANSPOSED, PACKED)  # the layers on one path, the head on another
ATTENTIONS = ["native", "torch"]  # native.py's layer kernels and attention, or torch's (exact_attention, SDPA)


def lean_runtime(arch: str, plan: KernelPlan | None = None, attention: str = "native") -> Runtime:
    """A tiny model's lean runtime: on ``plan``'s kernels, or transformers' (stock paths, its attention); its rows
    running native.py's layer kernels and attention ("native", where they run here) or torch's, attending by
    exact_attention and SDPA ("torch")."""
    if attention == "native" and native.unavailable():
        pytest.skip(native.unavailable())
    model = tiny_model(arch)
    runtime = prepare(model, "auto", plan=plan) if plan is not None else Runtime(model, LeanLlama(model))
    runtime.forward.native = attention == "native"
    assert runtime.forward.kind == ("lean+native" if attention == "native" else "lean")
    return runtime


@pytest.mark.parametrize("attention", ATTENTIONS)
@pytest.mark.parametrize("plan", [None, MIXED], ids=["stock-paths", "mixed-paths"])
@pytest.mark.parametrize("arch", LEAN_TYPES)
def test_lean_hidden_states_are_transformers(arch, plan, attention):
    """A prompt, then passes of 1..20 rows under tree masks: the hidden states of transformers'
    forward over a DynamicCache, within 1e-5 (fused QKV and gate/up may sum in another order; on the
    real model with packed paths they came out bit-identical: benchmarks/lean_forward.py)."""
    runtime = lean_runtime(arch, plan, attention)
    model = runtime.model
    generator = torch.Generator().manual_seed(0)
    static, dynamic = new_cache(runtime), DynamicCache(config=model.config)
    assert isinstance(static, StaticKV)
    cached = 0
    for rows in (17, 1, 4, 20, 2):
        embeds = model.get_input_embeddings()(torch.randint(3, 500, (rows,), generator=generator))
        allowed = tree_allowed(rows, cached, generator)
        positions = torch.arange(cached, cached + rows)
        lean = runtime.run(static, embeds, positions, allowed)
        with torch.inference_mode():
            reference = model.base_model(inputs_embeds=embeds[None], position_ids=positions[None],
                                         attention_mask=additive_mask(allowed, torch.float32, "cpu"),
                                         past_key_values=dynamic, use_cache=True).last_hidden_state[0]
        torch.testing.assert_close(lean, reference, atol=1e-5, rtol=1e-5)
        cached += rows
    assert static.get_seq_length() == dynamic.get_seq_length() == cached


@pytest.mark.parametrize("attention", ATTENTIONS)
@pytest.mark.parametrize("spec", ["efficient:3,2,2", "chain:1", "full:2,2,2/chain-groups"])
@pytest.mark.parametrize("arch", LEAN_TYPES)
def test_bita_and_our_ar_loop_on_the_lean_forward_equal_hf_generate(arch, spec, attention, one_thread):
    assert_lossless(lean_runtime(arch, MIXED, attention), spec, random_prompts(3, seed=21))


def test_the_fused_weights_are_the_models_own_storage():
    """QKV and gate/up are concatenated once and the model's linears become views of them: attaching
    the lean forward adds no copy of a weight (stock kernels: no per-path copies either)."""
    model = tiny_model("llama")

    def weight_bytes():
        storages = {p.untyped_storage().data_ptr(): p.untyped_storage().nbytes() for p in model.parameters()}
        return sum(storages.values())

    before = weight_bytes()
    lean = LeanLlama(model)
    assert weight_bytes() == before
    attention = model.model.layers[0].self_attn
    qkv = lean.layers[0][1].weight
    assert attention.q_proj.weight.data_ptr() == qkv.data_ptr()
    assert attention.k_proj.weight.data_ptr() == qkv[attention.q_proj.weight.shape[0]:].data_ptr()
    assert lean.layers[0][2].weight.data_ptr() == attention.o_proj.weight.data_ptr()


def test_the_static_cache_grows_and_crops_in_place():
    cache = StaticKV(layers=2, kv_heads=1, head_dim=2, dtype=torch.float32, device=torch.device("cpu"), capacity=4)
    first = torch.arange(6.0).view(1, 1, 3, 2)
    cache.reserve(3)
    cache.append(0, first, -first)
    cache.advance(3)
    cache.reserve(5)  # past the capacity: the buffers grow, keeping what they held
    keys, values = cache.append(0, torch.ones(1, 1, 5, 2), torch.ones(1, 1, 5, 2))
    assert cache.capacity >= 8 and torch.equal(keys[:, :, :3], first) and torch.equal(values[:, :, :3], -first)
    cache.advance(5)
    cache.crop(-5)
    assert cache.get_seq_length() == 3
    with pytest.raises(ValueError):
        cache.crop(2)


def test_llama3_rotary_scaling_runs_the_lean_forward_losslessly(one_thread):
    """Llama 3.x's "llama3" rope type: transformers bakes its scaling into ``inv_freq``, which the
    lean forward reads; a length-dependent ("dynamic") one keeps transformers' path."""
    config = TINY_CONFIGS["llama"]()
    config.rope_parameters = {"rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0, "low_freq_factor": 1.0,
                              "high_freq_factor": 4.0, "original_max_position_embeddings": 32}
    config.initializer_range = 0.2
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config).eval().requires_grad_(False)
    assert lean_unsupported(model) is None
    assert_lossless(Runtime(model, LeanLlama(model)), "efficient:3,2,2", random_prompts(3, seed=23, low=20, high=60))
    config.rope_parameters = {"rope_type": "dynamic", "rope_theta": 10000.0, "factor": 2.0}
    assert "rotary" in lean_unsupported(AutoModelForCausalLM.from_config(config))


def test_other_architectures_keep_transformers_path():
    gpt2 = tiny_model("gpt2")
    runtime = prepare(gpt2)
    assert "gpt2" in lean_unsupported(gpt2) and runtime.forward.kind == "transformers+exact"
    assert isinstance(new_cache(runtime), TransformersKV)
