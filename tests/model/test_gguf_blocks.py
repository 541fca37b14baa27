"""Finding a GGUF's blocks: the tensor index (gguf_index.py) is gguf-py's, read without the metadata values; a file cut
short or not a GGUF is refused in one line; a linear whose blocks are not its weight, or of a type the kernels do not
read, stays dense and the line says so."""

import logging
import struct

import numpy as np
import pytest
import torch
from conftest import tiny_model
from gguf import GGMLQuantizationType, GGUFReader, GGUFWriter, quantize
from torch import nn

from bita.errors import BitaError
from bita.model.gguf_blocks import attach_blocks
from bita.model.gguf_index import tensor_index
from bita.model.loading import default_gguf_path
from bita.runtime.blocks import blocks_of


def test_the_index_is_gguf_pys_on_the_default_models_file():
    path = default_gguf_path()
    index = tensor_index(path)
    for tensor in GGUFReader(path).tensors:
        entry = index[tensor.name]
        assert (entry.offset, entry.size, entry.type) == (tensor.data_offset, tensor.n_bytes, int(tensor.tensor_type))
        assert entry.rows == (tensor.data.shape[0] if tensor.data.ndim > 1 else 1)


@pytest.mark.parametrize("keep", [3, 20, 700_000, -100], ids=["magic", "header", "metadata", "last-tensor"])
def test_a_file_cut_short_is_refused_in_one_line(tmp_path, keep):
    data = default_gguf_path().read_bytes()
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(data[:keep])
    with pytest.raises(ValueError) as error:
        tensor_index(cut)
    assert "\n" not in str(error.value)


def test_a_file_that_is_not_a_gguf_is_refused(tmp_path):
    other = tmp_path / "other.gguf"
    other.write_bytes(b"PK\x03\x04" + bytes(100))
    with pytest.raises(ValueError, match="not a GGUF"):
        tensor_index(other)


def _write_model_file(model: nn.Module, path, kind) -> None:
    """``model``'s linears quantised to ``kind`` under the names transformers' loader maps them to."""
    writer = GGUFWriter(str(path), "llama")
    for layer, block in enumerate(model.model.layers):
        for name, module in (("attn_q", block.self_attn.q_proj), ("attn_k", block.self_attn.k_proj),
                             ("attn_v", block.self_attn.v_proj), ("attn_output", block.self_attn.o_proj),
                             ("ffn_gate", block.mlp.gate_proj), ("ffn_up", block.mlp.up_proj),
                             ("ffn_down", block.mlp.down_proj)):
            weight = module.weight.detach().numpy()
            writer.add_tensor(f"blk.{layer}.{name}.weight", quantize(weight, kind) if kind else weight,
                              raw_dtype=kind)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def test_blocks_that_are_not_the_weight_leave_it_dense_with_a_warning(tmp_path, caplog):
    """The file's blocks are another model's: each linear keeps its dense weight (never a wrong one)."""
    model = tiny_model("qwen2")  # no Q/K permutation: only the values differ
    _write_model_file(tiny_model("qwen2", seed=1), tmp_path / "other.gguf", GGMLQuantizationType.Q8_0)
    with caplog.at_level(logging.WARNING):
        line, every = attach_blocks(model, tmp_path / "other.gguf")
    assert not every and "none" in line and "differ" in caplog.text
    assert all(blocks_of(module) is None for module in model.modules())


def test_a_type_the_kernels_do_not_read_stays_dense_and_the_line_says_so(tmp_path):
    model = tiny_model("qwen2")
    _write_model_file(model, tmp_path / "f16.gguf", GGMLQuantizationType.F16)
    line, every = attach_blocks(model, tmp_path / "f16.gguf")
    assert not every and "F16 blocks are not read by the kernels" in line


def test_a_tiny_models_own_blocks_are_found_and_checked(tmp_path):
    model = tiny_model("qwen2")
    kind = GGMLQuantizationType.Q4_1
    _write_model_file(model, tmp_path / "own.gguf", kind)
    for name, tensor in {t.name: t for t in GGUFReader(tmp_path / "own.gguf").tensors}.items():
        layer, part = int(name.split(".")[1]), name.split(".")[2]
        module = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
                  "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
                  "ffn_down": "mlp.down_proj"}[part]
        from gguf import dequantize
        values = torch.from_numpy(np.array(dequantize(tensor.data, tensor.tensor_type)))
        model.get_submodule(f"model.layers.{layer}.{module}").weight.data.copy_(values)
    line, every = attach_blocks(model, tmp_path / "own.gguf")
    assert every and "14 in Q4_1" in line  # 2 layers x 7 linears; the untied head is not in the file


def test_a_corrupted_file_is_refused_before_anything_is_attached(tmp_path):
    model = tiny_model("qwen2")
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(default_gguf_path().read_bytes()[:5000])
    with pytest.raises(BitaError, match="cannot read broken.gguf's blocks"):
        attach_blocks(model, broken)
    assert all(blocks_of(module) is None for module in model.modules())


def test_loading_a_gguf_cut_short_is_refused_in_one_line_and_converts_nothing(tmp_path):
    from bita.model.loading import load_model
    from bita.package_data import cache_root

    cut = tmp_path / "cut.gguf"
    cut.write_bytes(default_gguf_path().read_bytes()[:5000])
    before = set(cache_root().iterdir()) if cache_root().exists() else set()
    with pytest.raises(BitaError, match="cannot read cut.gguf: cut.gguf is cut short") as error:
        load_model(str(cut), device="cpu", weights="blocks")
    assert "\n" not in str(error.value)
    assert set(cache_root().iterdir()) - before == set()  # no converted checkpoint, not even half of one


def header(tensors: int, values: int, body: bytes) -> bytes:
    return b"GGUF" + struct.pack("<IQQ", 3, tensors, values) + body


def text(value: str) -> bytes:
    return struct.pack("<Q", len(value)) + value.encode()


@pytest.mark.parametrize("data,message", [
    (header(0, 1, text("general.alignment") + struct.pack("<II", 4, 0)), "alignment 0 is not a power of two"),
    (header(0, 1, text("x") + struct.pack("<I", 9) + struct.pack("<IQ", 9, 1) * 20_000), "nests arrays"),
    (header(0, 1, struct.pack("<Q", 2 ** 62) + b"x"), "ends inside its header"),
    (header(1, 0, text("w") + struct.pack("<I", 1000) + b"\0" * 64), "1000 dimensions"),
], ids=["alignment-0", "arrays-20000-deep", "string-of-2^62", "1000-dimensions"])
def test_a_crafted_header_is_refused_in_one_line(tmp_path, data, message):
    crafted = tmp_path / "crafted.gguf"
    crafted.write_bytes(data)
    with pytest.raises(ValueError, match=message) as error:
        tensor_index(crafted)
    assert "\n" not in str(error.value)
