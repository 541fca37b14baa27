"""What ``--model`` takes: GGUF files and folders holding one, converted once and cached by size and
hash; a GGUF transformers cannot read is refused in one line."""

import numpy as np
import pytest
from gguf import GGUFWriter

from bita.errors import BitaError
from bita.model import loading
from bita.model.loading import converted_gguf_dir, gguf_in, model_source


def write_gguf(path, arch="llama"):
    writer = GGUFWriter(str(path), arch)
    writer.add_tensor("token_embd.weight", np.zeros((4, 8), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_gguf_in_finds_a_file_or_the_one_gguf_of_a_folder(tmp_path):
    model = write_gguf(tmp_path / "model.gguf")
    assert gguf_in(str(model)) == model and gguf_in(str(tmp_path)) == model
    assert gguf_in("HuggingFaceTB/SmolLM2-135M") is None  # a hub id
    (tmp_path / "config.json").write_text("{}")
    assert gguf_in(str(tmp_path)) is None  # a checkpoint folder
    (tmp_path / "config.json").unlink()
    write_gguf(tmp_path / "other.gguf")
    with pytest.raises(BitaError, match="holds 2 GGUF files .*model.gguf, other.gguf.*name the one"):
        gguf_in(str(tmp_path))


def test_an_unreadable_architecture_is_refused_naming_those_transformers_reads(tmp_path, monkeypatch):
    monkeypatch.setenv("BITA_CACHE", str(tmp_path / "cache"))
    model = write_gguf(tmp_path / "odd.gguf", arch="not-a-real-arch")
    with pytest.raises(BitaError, match="cannot read odd.gguf.*not-a-real-arch.*architectures: .*gemma3.*llama"):
        converted_gguf_dir(model)
    assert not any(p.name.startswith("odd") for p in (tmp_path / "cache").iterdir())  # nothing half-made


def test_a_packaged_gguf_name_needs_its_package(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(loading.PACKAGED_GGUFS, "absent.gguf", "no_such_gguf_package")
    with pytest.raises(BitaError, match="absent.gguf comes from the no-such-gguf-package package: pip install"):
        model_source("absent.gguf")
