"""llama.cpp as a bench baseline: left out with one line where it cannot run (not installed, not a GGUF
model, not a CPU); where llama-cpp-python is installed, it decodes the default model's own weights."""

import importlib.util
import logging

import pytest
import torch
from conftest import tiny_model

from bita.bench import llamacpp
from bita.bench.report import runnable
from bita.decode.hf_reference import hf_generate
from bita.model.loading import LoadedModel, encode_chat
from bita.runtime.runtime import runtime_of


def test_llamacpp_is_left_out_with_one_line_where_it_cannot_run(monkeypatch, caplog):
    model = tiny_model("llama")
    loaded = LoadedModel(model, None, "tiny-llama", runtime_of(model))
    monkeypatch.setattr(llamacpp.importlib.util, "find_spec", lambda name: None)
    assert "llama-cpp-python is not installed" in llamacpp.absent_because(loaded)
    with caplog.at_level(logging.WARNING):
        assert runnable(("hf", "llamacpp", "bita"), loaded) == ("hf", "bita")
    assert caplog.text.count("the bench runs without llama.cpp: llama-cpp-python is not installed") == 1
    monkeypatch.setattr(llamacpp.importlib.util, "find_spec", lambda name: object())  # as if installed
    assert "not loaded from one" in llamacpp.absent_because(loaded)  # a checkpoint, not a GGUF
    assert runnable(("hf", "bita"), loaded) == ("hf", "bita")


@pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None, reason="llama-cpp-python is not installed")
def test_llamacpp_decodes_the_default_models_weights_in_its_precision(default_model):
    """The shipped Q4_1 GGUF converted to F32 for the float32 model: greedy, deterministic, and its first
    token is HF generate's (the argmax after the prompt)."""
    ids = encode_chat(default_model.tokenizer, [{"role": "user", "content": "Name three colours."}])
    first = llamacpp.run_llamacpp(default_model, ids, 12)
    again = llamacpp.run_llamacpp(default_model, ids, 12)
    assert first.method == "llamacpp" and first.tokens == again.tokens and len(first.tokens) == 12
    assert first.tokens[0] == hf_generate(default_model.model, ids, 1, [])[0]
    assert llamacpp.gguf_in_dtype(llamacpp.source_gguf(default_model), torch.float32).name.endswith("-F32.gguf")
