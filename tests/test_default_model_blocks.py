"""End to end on the real default model held in its GGUF's blocks (SmolLM2-135M-Instruct's Q4_1 layers and Q8_0 tied
head, read by native_blocks.c): every linear found in the file, its dense weights dropped; in float32 our AR loop on
the blocks emits what it emits on the de-quantised weights, and BiTA with the shipped adapter emits our AR loop's
tokens on the blocks, greedy and sampled."""

import pytest
from torch import nn

from bita.decode.sampling import Sampling
from bita.generate import Request, collect, stream_ar, stream_bita
from bita.model.loading import encode_chat, load_model
from bita.model.shipped import resolve_adapter
from bita.runtime import native
from bita.runtime.blocks import blocks_of

PROMPTS = ["Write a Python function that reverses a string.", "Give three tips for staying focused while studying."]
TREE = "efficient:3,2,2/chain-groups"
pytestmark = pytest.mark.skipif(native.unavailable() is not None, reason=str(native.unavailable()))


@pytest.fixture(scope="module")
def on_blocks():
    return load_model("default", device="cpu", dtype="float32", weights="blocks")


def test_every_linear_is_read_from_the_files_blocks(on_blocks):
    model = on_blocks.model
    linears = [module for module in model.model.layers.modules() if type(module) is nn.Linear]
    assert len(linears) == 210 and {blocks_of(module).name for module in linears} == {"Q4_1"}
    assert all(module.weight.is_meta for module in linears)  # no dense copy beside the blocks
    assert blocks_of(model.lm_head).name == "Q8_0" and not model.lm_head.weight.is_meta  # tied: the embedding's
    assert on_blocks.runtime.reads_blocks and on_blocks.runtime.invariance.holds


@pytest.mark.parametrize("prompt", PROMPTS)
def test_our_ar_loop_on_the_blocks_emits_what_it_emits_on_dense_float32(on_blocks, default_model, prompt):
    ids = encode_chat(on_blocks.tokenizer, [{"role": "user", "content": prompt}])
    runs = [collect("ar", loaded, stream_ar(loaded, Request(ids, 32))) for loaded in (on_blocks, default_model)]
    assert runs[0].tokens == runs[1].tokens


@pytest.mark.parametrize("sampling", [None, Sampling(temperature=0.7, top_p=0.95, seed=0)], ids=["greedy", "sampled"])
def test_bita_on_the_blocks_is_our_ar_loop_on_them(on_blocks, sampling):
    adapter = resolve_adapter(on_blocks, None)[0]
    for prompt in PROMPTS:
        ids = encode_chat(on_blocks.tokenizer, [{"role": "user", "content": prompt}])
        request = Request(ids, 48, TREE, sampling=sampling)
        bita = collect("bita", on_blocks, stream_bita(on_blocks, adapter, request))
        assert bita.tokens == collect("ar", on_blocks, stream_ar(on_blocks, request)).tokens
        assert bita.forward_passes < len(bita.tokens)  # the adapter drafts on the blocks too
