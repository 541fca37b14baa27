"""Weights held in GGUF blocks for the tests: quantised by gguf-py into a block type the native kernels read, written
to a GGUF file, and given back de-quantised (as transformers' loader gives them) carrying their ``BlockSource``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from gguf import GGMLQuantizationType, GGUFReader, GGUFWriter, dequantize, quantize
from torch import nn

from bita.runtime.blocks import ATTRIBUTE, BlockSource, Part, with_blocks

BLOCK_TYPES = (GGMLQuantizationType.Q4_0, GGMLQuantizationType.Q4_1, GGMLQuantizationType.Q8_0)


def write_blocks(path: Path, weights: dict[str, np.ndarray],
                 kind: GGMLQuantizationType) -> dict[str, tuple[BlockSource, torch.Tensor]]:
    """Each float32 weight [rows, columns] quantised to ``kind`` and written to the GGUF ``path``: by name, its
    source and its de-quantised values [rows, columns] (float32)."""
    writer = GGUFWriter(str(path), "llama")
    for name, weight in weights.items():
        writer.add_tensor(name, quantize(np.ascontiguousarray(weight, dtype=np.float32), kind), raw_dtype=kind)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    size, found = path.stat().st_size, {}
    for tensor in GGUFReader(path).tensors:
        rows, row_bytes = tensor.data.shape
        source = BlockSource(str(path), int(tensor.tensor_type), int(tensor.shape[0]),
                             (Part(int(tensor.data_offset), rows, row_bytes),), size)
        found[tensor.name] = source, torch.from_numpy(np.array(dequantize(tensor.data, tensor.tensor_type)))
    return found


def block_weight(folder: Path, rows: int, columns: int, kind: GGMLQuantizationType, seed: int = 0) -> torch.Tensor:
    """A random weight [rows, columns] held in ``kind`` blocks in a file of ``folder``: its de-quantised float32
    values, carrying its source (``blocks_of``)."""
    generator = torch.Generator().manual_seed(seed)
    weight = torch.randn(rows, columns, generator=generator) / columns ** 0.5
    source, values = write_blocks(folder / f"w-{rows}x{columns}-{kind.name}-{seed}.gguf", {"w": weight.numpy()},
                                  kind)["w"]
    return with_blocks(values, source)


def hold_in_blocks(model: nn.Module, folder: Path, kind: GGMLQuantizationType) -> nn.Module:
    """``model`` with every plain linear's weight quantised to ``kind`` (a head tied to the embedding: the embedding
    too), written to a GGUF file in ``folder``: each takes its de-quantised values and carries its source, as
    model/gguf_blocks.attach_blocks leaves a model loaded from a GGUF."""
    linears = {name: module for name, module in model.named_modules() if type(module) is nn.Linear}
    found = write_blocks(folder / f"model-{kind.name}.gguf",
                         {name: module.weight.detach().float().numpy() for name, module in linears.items()}, kind)
    with torch.no_grad():
        for name, module in linears.items():
            source, values = found[name]
            module.weight.copy_(values.to(module.weight.dtype))
            setattr(module, ATTRIBUTE, source)
    return model
