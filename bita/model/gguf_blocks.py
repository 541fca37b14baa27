"""Which of a model's linears a GGUF file holds in blocks the native kernels read (runtime/blocks.py), found as
transformers' GGUF loader finds them: its name map between the file's tensors and the model's parameters
(``get_gguf_hf_weights_map``), Llama's Q and K rows reverse-permuted as its tensor processor permutes them. Each
is checked against the de-quantised weight the model was loaded with (a few rows of the blocks de-quantised as
gguf-py does and compared bit for bit), so a mapping that does not hold keeps the dense weight, never a wrong one.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import torch
from torch import nn

from ..errors import BitaError
from ..runtime.blocks import ATTRIBUTE, BLOCK_INPUTS, BLOCK_TYPES, BlockSource, Part

logger = logging.getLogger(__name__)
PERMUTED = ("llama", "mistral")  # architectures whose Q and K rows transformers' loader reverse-permutes
CHECKED_ROWS = 3  # rows of each weight compared with its blocks, de-quantised: the first, a middle one, the last


def _heads(model: nn.Module, gguf_name: str) -> int:
    """The heads by which transformers' loader reverse-permutes the rows of ``gguf_name`` (0: it does not)."""
    config = model.config
    if config.model_type not in PERMUTED:
        return 0
    if ".attn_q." in gguf_name:
        return config.num_attention_heads
    return config.num_key_value_heads if ".attn_k." in gguf_name else 0


def _mapping(model: nn.Module) -> dict[str, str]:
    """The model's parameter names by the GGUF tensor names transformers' loader gives them."""
    from transformers.modeling_gguf_pytorch_utils import TENSOR_PROCESSORS, TensorProcessor, get_gguf_hf_weights_map

    processor = TENSOR_PROCESSORS.get(model.config.model_type, TensorProcessor)(config=model.config.to_dict())
    return get_gguf_hf_weights_map(model, processor)


def _agrees(source: BlockSource, weight: torch.Tensor) -> bool:
    """Whether ``source``'s blocks, de-quantised as gguf-py does (rounded to the weight's dtype), equal ``weight``
    [rows, columns] on CHECKED_ROWS rows."""
    from gguf import GGMLQuantizationType, dequantize

    raw = source.raw()
    rows = sorted({0, source.rows // 2, source.rows - 1})
    values = torch.from_numpy(np.ascontiguousarray(dequantize(raw[rows], GGMLQuantizationType(source.type))))
    return torch.equal(values.to(weight.dtype), weight.detach()[rows].cpu())


def attach_blocks(model: nn.Module, gguf: Path) -> str:
    """Give each plain linear of ``model`` (loaded from ``gguf``, de-quantised) whose weight the file holds in blocks
    the kernels read its ``BlockSource`` (``module.bita_blocks``), where its blocks equal its weight. Returns one line
    saying what is held in blocks, or why nothing is. Raises BitaError where the file cannot be read."""
    from gguf import GGUFReader

    try:
        tensors = {tensor.name: tensor for tensor in GGUFReader(gguf).tensors}
    except (ValueError, OSError, IndexError) as error:
        raise BitaError(f"cannot read {gguf.name}'s blocks: {error}") from None
    names = {hf: gguf_name for gguf_name, hf in _mapping(model).items()}
    embedding = model.get_input_embeddings()
    tied = next(name for name, module in model.named_modules() if module is embedding)
    size, held, others, differ = gguf.stat().st_size, {}, set(), []
    for module_name, module in model.named_modules():
        if type(module) is not nn.Linear:
            continue
        name = names.get(f"{module_name}.weight", "")
        if name not in tensors and module.weight is embedding.weight:  # a head tied to the embedding: its tensor
            name = names.get(f"{tied}.weight", "")
        tensor = tensors.get(name)
        if tensor is None:
            continue
        if int(tensor.tensor_type) not in BLOCK_TYPES or module.in_features % BLOCK_INPUTS:
            others.add(tensor.tensor_type.name)
            continue
        rows, row_bytes = tensor.data.shape
        source = BlockSource(str(gguf), int(tensor.tensor_type), module.in_features,
                             (Part(int(tensor.data_offset), rows, row_bytes, _heads(model, tensor.name)),), size)
        if rows != module.out_features or not _agrees(source, module.weight):
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
    return f"{gguf.name}: linears held in blocks: {kinds or 'none'}{unread}"
