"""Adapter save/load, identity checks and corrupted files."""

import json

import pytest
import torch
from conftest import tiny_model
from transformers import DynamicCache

from bita.errors import BitaError
from bita.model.adapter import CONFIG_NAME, WEIGHTS_NAME, BitaAdapter


def test_parameter_shapes_follow_the_model(tiny):
    adapter = BitaAdapter.create(tiny, prompt_tokens=16, mask_tokens=3)
    shapes = adapter.config.base.kv_shapes
    assert len(adapter.prompt_keys) == len(shapes) == 2
    for key, value, (heads, dim) in zip(adapter.prompt_keys, adapter.prompt_values, shapes):
        assert key.shape == value.shape == (heads, 16, dim)
    assert adapter.mask_embeddings.shape == (3, 64)
    cache = adapter.prompt_cache(tiny, 2, torch.float32)
    assert cache.get_seq_length() == 16 and cache.layers[0].keys.shape[0] == 2


def test_shallow_prompts_are_embeddings_encoded_by_the_model(tiny):
    adapter = BitaAdapter.create(tiny, prompt_tokens=5, mask_tokens=3, prompt_style="shallow")
    assert adapter.prompt_embeddings.shape == (5, 64) and len(adapter.prompt_keys) == 0
    cache = adapter.prompt_cache(tiny, 2, torch.float32)
    reference = DynamicCache()
    tiny.base_model(inputs_embeds=adapter.prompt_embeddings[None], past_key_values=reference, use_cache=True)
    assert cache.get_seq_length() == 5
    torch.testing.assert_close(cache.layers[-1].keys[1], reference.layers[-1].keys[0])
    with pytest.raises(BitaError, match="prompt_style"):
        BitaAdapter.create(tiny, prompt_style="wide")


@pytest.mark.parametrize("prompt_style", ["deep", "shallow"])
def test_save_load_round_trip(tiny, tmp_path, prompt_style):
    adapter = BitaAdapter.create(tiny, prompt_tokens=4, mask_tokens=2, seed=3, prompt_style=prompt_style)
    adapter.config.training = {"steps": 7}
    adapter.save(tmp_path)
    loaded = BitaAdapter.load(tmp_path, tiny)
    assert loaded.config == adapter.config
    for (name, a), (_, b) in zip(adapter.named_parameters(), loaded.named_parameters()):
        assert torch.equal(a, b), name
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([CONFIG_NAME, WEIGHTS_NAME])


def test_adapter_for_another_model_is_refused(tmp_path):
    BitaAdapter.create(tiny_model("llama", seed=0), prompt_tokens=4).save(tmp_path / "a")
    with pytest.raises(BitaError, match="fingerprint"):
        BitaAdapter.load(tmp_path / "a", tiny_model("llama", seed=1))
    with pytest.raises(BitaError, match="model_type"):
        BitaAdapter.load(tmp_path / "a", tiny_model("qwen2", seed=0))


def test_missing_and_corrupted_files(tmp_path, tiny):
    with pytest.raises(BitaError, match="no BiTA adapter"):
        BitaAdapter.load(tmp_path / "nowhere", tiny)
    BitaAdapter.create(tiny, prompt_tokens=4).save(tmp_path)
    weights = (tmp_path / WEIGHTS_NAME).read_bytes()
    (tmp_path / WEIGHTS_NAME).write_bytes(weights[: len(weights) // 2])
    with pytest.raises(BitaError, match="corrupted adapter weights"):
        BitaAdapter.load(tmp_path, tiny)
    (tmp_path / WEIGHTS_NAME).write_bytes(weights)
    config = json.loads((tmp_path / CONFIG_NAME).read_text())
    (tmp_path / CONFIG_NAME).write_text("{not json")
    with pytest.raises(BitaError, match="corrupted adapter config"):
        BitaAdapter.load(tmp_path, tiny)
    config["prompt_tokens"] = 5
    (tmp_path / CONFIG_NAME).write_text(json.dumps(config))
    with pytest.raises(BitaError, match="do not match their config"):
        BitaAdapter.load(tmp_path, tiny)


def test_failed_save_leaves_previous_files_intact(tmp_path, tiny, monkeypatch):
    adapter = BitaAdapter.create(tiny, prompt_tokens=4)
    adapter.save(tmp_path)
    before = (tmp_path / WEIGHTS_NAME).read_bytes()

    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr("bita.model.adapter.save_file", broken)
    with pytest.raises(OSError):
        BitaAdapter.create(tiny, prompt_tokens=4, seed=9).save(tmp_path)
    assert (tmp_path / WEIGHTS_NAME).read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([CONFIG_NAME, WEIGHTS_NAME])
