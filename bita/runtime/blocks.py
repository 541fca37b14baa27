"""A frozen weight held as a GGUF file holds it: where its blocks lie in the file, read when the native blocks kernels
(native_blocks.c) pack them, never de-quantised beside them.

A ``BlockSource`` names a weight [rows, columns] of one ggml block type as byte ranges of a file (``Part``: one GGUF
tensor, its rows in the file's order, reverse-permuted as transformers' loader permutes Llama's Q and K rows), a
fused product's parts one after the other (``fused``). A model's linear carries its source as ``module.bita_blocks``
(model/gguf_blocks.py finds them), and a product's weight as its ``bita_blocks`` attribute (``with_blocks``), which
the kernel plan's blocks paths read (``blocks_of``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

# ggml's block types a blocks kernel reads (native_blocks.c the first three, native_blocks_q8.c all): numbers, names
BLOCK_TYPES = {2: "Q4_0", 3: "Q4_1", 8: "Q8_0", 6: "Q5_0", 12: "Q4_K", 13: "Q5_K", 14: "Q6_K"}
ATTRIBUTE = "bita_blocks"  # where a module or a product's weight keeps its BlockSource


@dataclass(frozen=True)
class Part:
    """One GGUF tensor's blocks: ``rows`` rows of ``row_bytes`` bytes at byte ``offset`` of the file, their rows
    reverse-permuted by ``heads`` heads (0: as stored)."""

    offset: int
    rows: int
    row_bytes: int
    heads: int = 0


@dataclass(frozen=True)
class BlockSource:
    """A weight [rows, columns] of ggml type ``type`` held in ``file`` as ``parts`` (their rows concatenated)."""

    file: str
    type: int
    columns: int
    parts: tuple[Part, ...]
    file_size: int  # the file's size when its blocks were found: a changed file is refused, not misread

    @property
    def rows(self) -> int:
        return sum(part.rows for part in self.parts)

    @property
    def name(self) -> str:
        """The block type's name, e.g. 'Q4_1'."""
        return BLOCK_TYPES[self.type]

    def raw(self) -> np.ndarray:
        """The blocks as transformers' rows order them: uint8 [rows, columns / block inputs x block bytes]. Raises
        ValueError where the file is not as it was when the blocks were found."""
        path = Path(self.file)
        size = path.stat().st_size if path.exists() else -1
        if size != self.file_size:
            raise ValueError(f"{self.file} changed since its blocks were found ({size} bytes, not {self.file_size})")
        arrays = []
        with path.open("rb") as handle:
            for part in self.parts:
                handle.seek(part.offset)
                data = np.fromfile(handle, dtype=np.uint8, count=part.rows * part.row_bytes)
                if data.size != part.rows * part.row_bytes:
                    raise ValueError(f"{self.file} ends inside a tensor's blocks")
                arrays.append(_unpermuted(data.reshape(part.rows, part.row_bytes), part.heads))
        return np.concatenate(arrays) if len(arrays) > 1 else arrays[0]

    def __deepcopy__(self, memo: dict) -> BlockSource:
        return self  # frozen: a model's copy (another dtype) reads the same blocks


def _unpermuted(rows: np.ndarray, heads: int) -> np.ndarray:
    """rows [N, ...] in the order transformers' GGUF loader gives Llama's Q and K weights (its
    ``_reverse_permute_weights``: each head's rows, stored as pairs, put back as halves); as they are for 0 heads."""
    if not heads:
        return rows
    dim = rows.shape[0] // heads // 2
    return rows.reshape(heads, dim, 2, *rows.shape[1:]).swapaxes(2, 1).reshape(rows.shape)


def fused(sources: list[BlockSource | None]) -> BlockSource | None:
    """The source of the products' rows one after the other (a fused product), where every part is held in blocks
    of one type in one file (else None)."""
    first = sources[0]
    if any(source is None for source in sources):
        return None
    if any((source.file, source.type, source.columns) != (first.file, first.type, first.columns) for source in sources):
        return None
    return BlockSource(first.file, first.type, first.columns, sum((source.parts for source in sources), ()),
                       first.file_size)


def blocks_of(weight: torch.Tensor | nn.Module) -> BlockSource | None:
    """The blocks a product's weight, or a linear module, is held in (None: dense alone)."""
    return getattr(weight, ATTRIBUTE, None)


def held_types(held: Iterable[torch.Tensor | nn.Module]) -> list[str]:
    """The block types (sorted names) the weights or modules ``held`` are held in, those held in blocks."""
    return sorted({source.name for source in map(blocks_of, held) if source is not None})


def with_blocks(weight: torch.Tensor, source: BlockSource | None) -> torch.Tensor:
    """``weight`` [out, in] (a product's: a view or a fused copy) carrying ``source`` where there is one."""
    if source is not None:
        setattr(weight, ATTRIBUTE, source)
    return weight
