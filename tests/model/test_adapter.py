"""Adapter save/load, identity checks and corrupted files; the format-1 files still load; the Hub:
a repository in a Hugging Face cache laid out in a temporary folder loads offline and drafts as the
saved adapter does, a missing one is one clear line, and a push goes through the mixin's upload."""

import json
from dataclasses import asdict

import pytest
import torch
from conftest import tiny_model
from huggingface_hub import ModelCard, constants
from safetensors.torch import save_file
from transformers import DynamicCache

from bita.decode.step import Decoding, bita_steps
from bita.decode.stopping import StopCondition
from bita.drafts.tree import parse_tree_spec
from bita.errors import BitaError
from bita.model.adapter import BitaAdapter
from bita.model.adapter_files import (ACCEPTANCE_NAME, CARD_NAME, CONFIG_NAME, LEGACY_CONFIG_NAME, LEGACY_WEIGHTS_NAME,
                                      WEIGHTS_NAME)
from bita.runtime.runtime import runtime_of


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


def test_mask_rows_are_made_once_and_again_after_the_embeddings_change(tiny):
    """A pass's mask embeddings: the first n in the pass's dtype; the same tensor pass after pass (a padded pass's
    table copies them once) until an optimiser's step or a load changes them; where autograd records, gradients
    reach them."""
    adapter = BitaAdapter.create(tiny, prompt_tokens=2, mask_tokens=3, seed=1)
    cpu = torch.device("cpu")
    with torch.inference_mode():
        rows = adapter.mask_rows(2, torch.bfloat16, cpu)
        assert rows is adapter.mask_rows(2, torch.bfloat16, cpu)
        assert adapter.mask_rows(3, torch.bfloat16, cpu).shape == (3, tiny.config.hidden_size)
    assert torch.equal(rows, adapter.mask_embeddings.detach()[:2].to(torch.bfloat16))
    adapter.mask_embeddings.grad = torch.ones_like(adapter.mask_embeddings)
    torch.optim.SGD(adapter.parameters(), lr=0.5).step()
    with torch.no_grad():
        stepped = adapter.mask_rows(2, torch.bfloat16, cpu)
    assert torch.equal(stepped, adapter.mask_embeddings.detach()[:2].to(torch.bfloat16))
    assert not torch.equal(stepped, rows)
    with torch.no_grad():  # an in-place write of the user's own (how folded() writes too)
        adapter.mask_embeddings.mul_(2)
        assert torch.equal(adapter.mask_rows(2, torch.float32, cpu), adapter.mask_embeddings[:2])
    adapter.mask_embeddings.grad = None
    (2 * adapter.mask_rows(2, torch.float32, cpu)).sum().backward()
    assert torch.equal(adapter.mask_embeddings.grad[:2], torch.full((2, tiny.config.hidden_size), 2.0))


@pytest.mark.parametrize("prompt_style", ["deep", "shallow"])
def test_save_load_round_trip(tiny, tmp_path, prompt_style):
    adapter = BitaAdapter.create(tiny, prompt_tokens=4, mask_tokens=2, seed=3, prompt_style=prompt_style)
    adapter.config.training = {"steps": 7}
    adapter.save(tmp_path)
    loaded = BitaAdapter.load(tmp_path, tiny)
    assert loaded.config == adapter.config
    for (name, a), (_, b) in zip(adapter.named_parameters(), loaded.named_parameters()):
        assert torch.equal(a, b), name
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([CONFIG_NAME, WEIGHTS_NAME, CARD_NAME])


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
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([CONFIG_NAME, WEIGHTS_NAME, CARD_NAME])


def trained(model, name: str = "someone/tiny-llama") -> BitaAdapter:
    """A random adapter with training figures and statistics, as train and calibrate leave them."""
    adapter = BitaAdapter.create(model, prompt_tokens=4, mask_tokens=3, seed=5, name=name)
    adapter.config.training = {"steps_done": 40, "lr": 0.03, "heldout_top1_per_depth": [0.5, 0.3, 0.2]}
    adapter.config.acceptance = {"samples": 4, "passes": 99}
    return adapter


def test_the_files_name_the_base_model_and_keep_the_statistics_apart(tiny, tmp_path):
    trained(tiny).save(tmp_path)
    config = json.loads((tmp_path / CONFIG_NAME).read_text())
    assert config["format"] == "bita-adapter/2" and config["base_model_name_or_path"] == "someone/tiny-llama"
    assert "base_model_revision" in config and config["base"]["fingerprint"] and "acceptance" not in config
    assert json.loads((tmp_path / ACCEPTANCE_NAME).read_text()) == {"samples": 4, "passes": 99}
    card = ModelCard.load(tmp_path / CARD_NAME)
    assert card.data.base_model == "someone/tiny-llama" and card.data.library_name == "bita-decoding"
    assert "| held-out top-1 per mask depth | 0.500 / 0.300 / 0.200 |" in card.text and "| steps | 40 |" in card.text
    assert not {"config.json", "adapter_config.json"} & {p.name for p in tmp_path.iterdir()}  # others' names


def test_a_format_1_adapter_still_loads_and_saves_as_format_2(tiny, tmp_path):
    adapter = trained(tiny)
    config = asdict(adapter.config)
    del config["base"]["revision"]  # format 1 had no revision
    (tmp_path / LEGACY_CONFIG_NAME).write_text(json.dumps({"format": "bita-adapter/1", **config}))
    save_file({k: p.detach().contiguous() for k, p in adapter.named_parameters()}, tmp_path / LEGACY_WEIGHTS_NAME)
    old = BitaAdapter.load(tmp_path, tiny)
    assert old.config == adapter.config and torch.equal(old.mask_embeddings, adapter.mask_embeddings)
    old.save(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([CONFIG_NAME, WEIGHTS_NAME, ACCEPTANCE_NAME,
                                                                  CARD_NAME])
    assert BitaAdapter.load(tmp_path, tiny).config == adapter.config


def hub_cache(root, repo_id: str, folder) -> None:
    """``folder``'s files as the snapshot of ``repo_id``'s main branch in a Hugging Face cache at ``root``."""
    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = root / f"models--{repo_id.replace('/', '--')}"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    snapshot = repo / "snapshots" / commit
    snapshot.mkdir(parents=True)
    for file in folder.iterdir():
        blob = repo / "blobs" / file.name
        blob.parent.mkdir(exist_ok=True)
        blob.write_bytes(file.read_bytes())
        (snapshot / file.name).symlink_to(f"../../blobs/{file.name}")


def drafts_of(model, adapter) -> list:
    steps = bita_steps(Decoding(runtime_of(model), adapter, parse_tree_spec("efficient:3,2,1")), [5, 9, 13, 7, 5, 9],
                       StopCondition(12))
    return [(r.emitted, r.next_drafts) for r in steps]


def test_a_hub_repository_loads_offline_from_the_cache_and_drafts_the_same(tiny, tmp_path, monkeypatch):
    adapter = trained(tiny)
    adapter.save(tmp_path / "saved")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    hub_cache(tmp_path / "hub", "someone/tiny-bita", tmp_path / "saved")
    fetched = BitaAdapter.from_pretrained("someone/tiny-bita", model=tiny)
    assert fetched.config == adapter.config
    assert drafts_of(tiny, fetched) == drafts_of(tiny, adapter)
    with pytest.raises(BitaError, match="not in the local Hugging Face cache") as missing:
        BitaAdapter.from_pretrained("someone/elsewhere", model=tiny)
    assert "hf download someone/elsewhere" in str(missing.value) and "\n" not in str(missing.value)


def test_push_to_hub_uploads_the_folder_through_the_mixin(tiny, monkeypatch):
    uploaded = {}

    class FakeApi:
        def __init__(self, token=None):
            pass

        def create_repo(self, repo_id, **kwargs):
            return type("Repo", (), {"repo_id": repo_id})()

        def upload_folder(self, folder_path, **kwargs):
            uploaded.update({p.name: p.read_bytes() for p in folder_path.iterdir()})
            return "https://huggingface.co/someone/tiny-bita/commit/1"

    monkeypatch.setattr("huggingface_hub.hub_mixin.HfApi", FakeApi)
    assert trained(tiny).push_to_hub("someone/tiny-bita").endswith("/commit/1")
    assert set(uploaded) == {CONFIG_NAME, WEIGHTS_NAME, ACCEPTANCE_NAME, CARD_NAME}
    assert b'from_pretrained("someone/tiny-bita"' in uploaded[CARD_NAME]
