"""BiTA on weights held in GGUF blocks (native_blocks.c; native_blocks_q8.c, 8-bit activations) emits our AR loop's
tokens on the same blocks, greedy and sampled, for every block type the kernels read: on the Llama family (the lean
forward, its stack in one native call a pass) and on Gemma 3 past its sliding window (transformers' forward, each
linear through PlannedForward). In float32 a pass's logits on blocks are the dense float32 kernel's on the
de-quantised weights, bit for bit; and the dense weights a blocks path replaces are dropped (meta tensors), the input
embedding's kept."""

import copy

import pytest
import torch
from conftest import WINDOW, random_prompts, tiny_model, tree_of
from gguf_weights import BLOCK_TYPES, hold_in_blocks
from torch import nn

from bita.decode.autoregressive import ar_steps
from bita.decode.sampling import Sampling
from bita.decode.step import Chains, Decoding, bita_steps
from bita.decode.stopping import StopCondition
from bita.model.adapter import BitaAdapter
from bita.runtime import native
from bita.runtime.build import prepare
from bita.runtime.invariance import probe_row_invariance
from bita.runtime.kernel_plan import BLOCKS, BLOCKS_DOT, BLOCKS_Q8, NATIVE, KernelPlan

pytestmark = [pytest.mark.usefixtures("one_thread"),
              pytest.mark.skipif(native.unavailable() is not None, reason=str(native.unavailable()))]
kinds = pytest.mark.parametrize("kind", BLOCK_TYPES, ids=[kind.name for kind in BLOCK_TYPES])
PATHS = [(BLOCKS, torch.float32), (BLOCKS, torch.bfloat16), (BLOCKS_DOT, torch.bfloat16), (BLOCKS_Q8, torch.float32),
         (BLOCKS_Q8, torch.bfloat16)]


def emitted(steps) -> list[int]:
    return [t for record in steps for t in record.emitted]


def on_blocks(arch: str, folder, kind, path: str, dtype: torch.dtype, lean: bool = True):
    """A tiny model of ``arch`` held in ``kind`` blocks, in ``dtype``, every linear on ``path``."""
    why_not = native.KERNELS[path].unavailable()
    if why_not is not None:
        pytest.skip(why_not)
    model = hold_in_blocks(tiny_model(arch), folder, kind).to(dtype)
    return prepare(model, "auto", plan=KernelPlan(path, path), lean=lean, weights="blocks")


def assert_bita_is_ar(runtime, specs, prompts, sampling=None) -> None:
    adapter = BitaAdapter.create(runtime.model, prompt_tokens=4, mask_tokens=3, seed=1)
    for spec in specs:
        for index, prompt in enumerate(prompts):
            chosen = Sampling(0.9, top_p=0.95, seed=index) if sampling else None
            extra = {"sampling": chosen} if chosen else {}
            reference = emitted(ar_steps(runtime, prompt, StopCondition(20), *([chosen] if chosen else [])))
            decoding = Decoding(runtime, adapter, tree_of(spec), chains=Chains(ngram_tokens=3), **extra)
            assert emitted(bita_steps(decoding, prompt, StopCondition(20))) == reference, (spec, prompt)


@kinds
@pytest.mark.parametrize("arch", ["llama", "qwen2", "mistral"])
@pytest.mark.parametrize("path,dtype", PATHS, ids=[f"{p}-{str(d)[6:]}" for p, d in PATHS])
def test_bita_on_blocks_is_our_ar_loop_on_the_lean_forward(tmp_path, arch, kind, path, dtype):
    runtime = on_blocks(arch, tmp_path, kind, path, dtype)
    assert runtime.forward.kind.endswith("+stack") and runtime.reads_blocks
    found = probe_row_invariance(runtime)
    assert found.holds and found.worst == 0.0, found.describe()
    prompts = random_prompts(3, seed=5)
    assert_bita_is_ar(runtime, ("efficient:3,2,2", "dynamic:12"), prompts)
    assert_bita_is_ar(runtime, ("efficient:3,2,2",), prompts, sampling=True)


@kinds
@pytest.mark.parametrize("path", [BLOCKS, BLOCKS_Q8])
def test_bita_on_blocks_is_our_ar_loop_on_transformers_path_past_a_window(tmp_path, kind, path):
    """Gemma 3 (interleaved sliding and full attention) runs transformers' forward, its linears on a blocks path."""
    runtime = on_blocks("gemma3", tmp_path, kind, path, torch.float32, lean=False)
    assert not runtime.forward.kind.startswith("lean") and runtime.reads_blocks
    prompts = random_prompts(2, seed=13, low=WINDOW - 3, high=4 * WINDOW)
    assert_bita_is_ar(runtime, ("efficient:3,2,2", "chain:1"), prompts)
    assert_bita_is_ar(runtime, ("efficient:3,2,2",), prompts, sampling=True)


@kinds
def test_in_float32_a_pass_on_blocks_gives_the_dense_kernels_logits_bit_for_bit(tmp_path, kind):
    model = hold_in_blocks(tiny_model("llama"), tmp_path, kind)
    dense = prepare(copy.deepcopy(model), "auto", plan=KernelPlan(NATIVE, NATIVE), weights="dense")
    blocks = prepare(model, "auto", plan=KernelPlan(BLOCKS, BLOCKS), weights="blocks")
    tokens = torch.tensor(random_prompts(1, seed=3, low=30, high=31)[0])
    logits = []
    for runtime in (dense, blocks):
        cache = runtime.new_cache(rows=len(tokens))
        allowed = torch.ones(len(tokens), len(tokens), dtype=torch.bool).tril()
        hidden = runtime.run(cache, model.get_input_embeddings()(tokens), torch.arange(len(tokens)), allowed)
        logits.append(runtime.logits(hidden))
        runtime.release(cache)
    assert torch.equal(logits[0], logits[1])


def test_the_dense_weights_a_blocks_path_replaces_are_dropped(tmp_path):
    model = tiny_model("llama")
    model.lm_head.weight = model.get_input_embeddings().weight  # tied: the head keeps it (the embedding reads it)
    prepare(hold_in_blocks(model, tmp_path, BLOCK_TYPES[1]), "auto", plan=KernelPlan(BLOCKS, BLOCKS),
            weights="blocks")
    held = [module for module in model.model.layers.modules() if type(module) is nn.Linear]
    assert held and all(module.weight.is_meta for module in held)
    assert not model.lm_head.weight.is_meta and model.lm_head.weight is model.get_input_embeddings().weight
    with pytest.raises(Exception, match="--weights dense"):  # training needs the dense weights
        with torch.enable_grad():
            held[0](torch.randn(2, held[0].in_features, requires_grad=True))
