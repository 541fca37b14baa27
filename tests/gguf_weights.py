"""Weights held in GGUF blocks for the tests: quantised by gguf-py into a block type the native kernels read (or, for
the K-quants gguf-py cannot quantise, random blocks with small scales), written to a GGUF file, and given back
de-quantised (as transformers' loader gives them) carrying their ``BlockSource``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFReader, GGUFWriter, dequantize, quantize
from torch import nn

from bita.runtime.blocks import ATTRIBUTE, BlockSource, Part, with_blocks

BLOCK_TYPES = (GGMLQuantizationType.Q4_0, GGMLQuantizationType.Q4_1, GGMLQuantizationType.Q8_0)
# the types native_blocks_q8.c alone reads (K-quants: 256 inputs a block), and where each holds its float16 scales
Q8_ONLY_TYPES = (GGMLQuantizationType.Q5_0, GGMLQuantizationType.Q4_K, GGMLQuantizationType.Q5_K,
                 GGMLQuantizationType.Q6_K)
SCALES_AT = {GGMLQuantizationType.Q4_K: (0, 2), GGMLQuantizationType.Q5_K: (0, 2), GGMLQuantizationType.Q6_K: (208,)}


def random_blocks(rows: int, columns: int, kind: GGMLQuantizationType, generator: np.random.Generator) -> np.ndarray:
    """Blocks of ``kind`` for a weight [rows, columns]: random bytes, the super-blocks' float16 scales set small.
    uint8 [rows, columns / block inputs x block bytes]."""
    inputs, size = GGML_QUANT_SIZES[kind]
    blocks = generator.integers(0, 256, (rows, columns // inputs, size), dtype=np.uint8)
    for at in SCALES_AT[kind]:
        scales = generator.uniform(0.0005, 0.002, blocks.shape[:2]).astype(np.float16)
        blocks[..., at:at + 2] = scales[..., None].view(np.uint8)
    return blocks.reshape(rows, -1)

def write_blocks(path: Path, weights: dict[str, np.ndarray],
                 kind: GGMLQuantizationType) -> dict[str, tuple[BlockSource, torch.Tensor]]:
    """Each float32 weight [rows, columns] quantised to ``kind`` (a K-quant: ``random_blocks`` of its shape) and
    written to the GGUF ``path``: by name, its source and its de-quantised values [rows, columns] (float32)."""
    writer = GGUFWriter(str(path), "llama")
    generator = np.random.default_rng(len(weights))
    for name, weight in weights.items():
        blocks = random_blocks(*weight.shape, kind, generator) if kind in SCALES_AT else \
            quantize(np.ascontiguousarray(weight, dtype=np.float32), kind)
        writer.add_tensor(name, blocks, raw_dtype=kind)
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
