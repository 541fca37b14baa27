"""Which of a model's linears a GGUF file holds in blocks the native kernels read (runtime/blocks.py), found as
transformers' GGUF loader finds them: gguf-py's tensor name map of the architecture (built once), Llama's Q and K
rows reverse-permuted as its tensor processor permutes them; the file's tensor index read by gguf_index.py. Each
is checked against the de-quantised weight the model was loaded with (a few rows of the blocks de-quantised as
gguf-py does and compared bit for bit), so a mapping that does not hold keeps the dense weight, never a wrong one.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, dequantize
from torch import nn

from ..errors import BitaError
from ..runtime.blocks import ATTRIBUTE, BLOCK_TYPES, BlockSource, Part
from .gguf_index import tensor_index

logger = logging.getLogger(__name__)
PERMUTED = ("llama", "mistral")  # architectures whose Q and K rows transformers' loader reverse-permutes
RENAMED = {"gemma3_text": "gemma3", "cohere": "command-r", "qwen2_moe": "qwen2moe", "qwen3_moe": "qwen3moe"}  # gguf's
CHECKED_ROWS = 3  # rows of each weight compared with its blocks, de-quantised: the first, a middle one, the last


def _heads(model: nn.Module, gguf_name: str) -> int:
    """The heads by which transformers' loader reverse-permutes the rows of ``gguf_name`` (0: it does not)."""
    config = model.config
    if config.model_type not in PERMUTED:
        return 0
    if ".attn_q." in gguf_name:
        return config.num_attention_heads
    return config.num_key_value_heads if ".attn_k." in gguf_name else 0


def _gguf_names(model: nn.Module) -> Callable[[str], str | None]:
    """The GGUF tensor name of a module of ``model`` (by its name), as transformers' loader maps them (gguf-py's
    tensor name map of the model's architecture)."""
    from gguf import MODEL_ARCH_NAMES, get_tensor_name_map

    model_type = RENAMED.get(model.config.model_type, model.config.model_type)
    arch = next((key for key, value in MODEL_ARCH_NAMES.items() if value == model_type), None)
    if arch is None:
        return lambda name: None
    return get_tensor_name_map(arch, model.config.num_hidden_layers).get_name


def _agrees(source: BlockSource, weight: torch.Tensor) -> bool:
    """Whether ``source``'s blocks, de-quantised as gguf-py does (rounded to the weight's dtype), equal ``weight``
    [rows, columns] on CHECKED_ROWS rows."""
    raw = source.raw()
    rows = sorted({0, source.rows // 2, source.rows - 1})
    values = torch.from_numpy(np.ascontiguousarray(dequantize(raw[rows], GGMLQuantizationType(source.type))))
    return torch.equal(values.to(weight.dtype), weight.detach()[rows].cpu())


def attach_blocks(model: nn.Module, gguf: Path) -> tuple[str, bool]:
    """Give each plain linear of ``model`` (loaded from ``gguf``, de-quantised) whose weight the file holds in blocks
    the kernels read its ``BlockSource`` (``module.bita_blocks``), where its blocks equal its weight. Returns one line
    saying what is held in blocks (or why nothing is), and whether every linear of the layers is. Raises BitaError
    where the file cannot be read."""
    try:
        tensors = tensor_index(gguf)
    except (ValueError, OSError) as error:
        raise BitaError(f"cannot read {gguf.name}'s blocks: {error}") from None
    gguf_name, size = _gguf_names(model), gguf.stat().st_size
    embedding = model.get_input_embeddings()
    tied = next(name for name, module in model.named_modules() if module is embedding)
    held, others, differ, layers = {}, set(), [], []
    for module_name, module in model.named_modules():
        if type(module) is not nn.Linear:
            continue
        in_layers = ".layers." in f".{module_name}"
        layers += [module] if in_layers else []
        entry = tensors.get(f"{gguf_name(module_name)}.weight")
        if entry is None and module.weight is embedding.weight:  # a head tied to the embedding: its tensor
            entry = tensors.get(f"{gguf_name(tied)}.weight")
        if entry is None:
            continue
        inputs = GGML_QUANT_SIZES[GGMLQuantizationType(entry.type)][0] if entry.type in BLOCK_TYPES else 0
        if not inputs or module.in_features % inputs:
            others.add(GGMLQuantizationType(entry.type).name)
            continue
        source = BlockSource(str(gguf), entry.type, module.in_features,
                             (Part(entry.offset, entry.rows, entry.size // entry.rows, _heads(model, entry.name)),),
                             size)
        if entry.rows != module.out_features or not _agrees(source, module.weight):
            differ.append(module_name)
            continue
        setattr(module, ATTRIBUTE, source)
        held[source.name] = held.get(source.name, 0) + 1
    if differ:
        logger.warning("%d linears' blocks in %s differ from their de-quantised weights (%s ...): they stay dense",
                       len(differ), gguf.name, differ[0])
    kinds = ", ".join(f"{count} in {name}" for name, count in sorted(held.items()))
    unread = f"; {', '.join(sorted(others))} blocks are not read by the kernels (those linears stay dense)" \
        if others else ""
    every = bool(layers) and all(hasattr(module, ATTRIBUTE) for module in layers)
    return f"{gguf.name}: linears held in blocks: {kinds or 'none'}{unread}", every
