"""A GGUF file's tensor index: each tensor's name, shape, ggml type and where its bytes lie, read from the header
without decoding its metadata values (gguf-py's GGUFReader decodes every one, the tokenizer's 49k strings included:
4 s for the default model; this takes a few milliseconds). A truncated or corrupted file raises ValueError, in one
line."""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass
from pathlib import Path

from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

MAGIC = b"GGUF"
STRING, ARRAY = 8, 9  # GGUF's value types of variable size
FIXED_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}  # the other types' bytes
ALIGNMENT_KEY, DEFAULT_ALIGNMENT = "general.alignment", 32
MAX_NESTING, MAX_DIMENSIONS = 8, 4  # arrays in arrays a header may hold; a tensor's dimensions (GGML_MAX_DIMS)


@dataclass(frozen=True)
class TensorEntry:
    """One tensor: ``shape`` as GGUF lists it (innermost first), its ggml ``type`` and bytes at ``offset``."""

    name: str
    shape: tuple[int, ...]
    type: int
    offset: int
    size: int

    @property
    def rows(self) -> int:
        """Rows of the weight [rows, columns] it holds (the product of the outer dimensions)."""
        count = 1
        for dimension in self.shape[1:]:
            count *= dimension
        return count


class _Cursor:
    """Reads GGUF's little-endian fields from ``data`` at ``at``."""

    def __init__(self, data: mmap.mmap):
        self.data, self.at = data, 0

    def take(self, form: str):
        value = struct.unpack_from(form, self.data, self.at)
        self.at += struct.calcsize(form)
        return value[0]

    def string(self) -> str:
        length = self.take("<Q")
        if length > len(self.data) - self.at:  # checked before anything is read
            raise ValueError("it ends inside its header")
        text = self.data[self.at:self.at + length]
        self.at += length
        return text.decode("utf-8", errors="replace")

    def skip(self, kind: int, depth: int = 0) -> None:
        """Past a value of GGUF type ``kind`` (an array in ``depth`` arrays: at most MAX_NESTING)."""
        if kind == STRING:
            length = self.take("<Q")  # read before ``at`` is: ``self.at += self.take(...)`` would lose its advance
            self.at += length
        elif kind == ARRAY:
            if depth >= MAX_NESTING:
                raise ValueError(f"its header nests arrays more than {MAX_NESTING} deep")
            inner, count = self.take("<I"), self.take("<Q")
            if inner in FIXED_SIZES:
                self.at += FIXED_SIZES[inner] * count
            else:
                for _ in range(count):
                    self.skip(inner, depth + 1)
        elif kind in FIXED_SIZES:
            self.at += FIXED_SIZES[kind]
        else:
            raise ValueError(f"its header holds a value of unknown type {kind}")


def tensor_index(path: Path) -> dict[str, TensorEntry]:
    """The tensors of the GGUF ``path`` by name. Raises ValueError (one line) where it is not a GGUF file of version 2
    or 3, or is cut short."""
    with path.open("rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
        try:
            return _read(data)
        except (struct.error, IndexError, OverflowError) as error:
            raise ValueError(f"{path.name} is cut short or corrupted ({error})") from None


def _read(data: mmap.mmap) -> dict[str, TensorEntry]:
    cursor = _Cursor(data)
    if data[:4] != MAGIC:
        raise ValueError("not a GGUF file (no GGUF magic)")
    cursor.at = 4
    version = cursor.take("<I")
    if version not in (2, 3):
        raise ValueError(f"GGUF version {version} (versions 2 and 3 are read)")
    tensors, values = cursor.take("<Q"), cursor.take("<Q")
    alignment = DEFAULT_ALIGNMENT
    for _ in range(values):
        key, kind = cursor.string(), cursor.take("<I")
        if key == ALIGNMENT_KEY and kind == 4:
            alignment = cursor.take("<I")
            if alignment < 1 or alignment & (alignment - 1):
                raise ValueError(f"its alignment {alignment} is not a power of two")
        else:
            cursor.skip(kind)
    found = []
    for _ in range(tensors):
        name, dimensions = cursor.string(), cursor.take("<I")
        if dimensions > MAX_DIMENSIONS:
            raise ValueError(f"tensor {name} has {dimensions} dimensions (ggml's have at most {MAX_DIMENSIONS})")
        shape = tuple(cursor.take("<Q") for _ in range(dimensions))
        found.append((name, shape, cursor.take("<I"), cursor.take("<Q")))
    start = -(-cursor.at // alignment) * alignment
    index = {}
    for name, shape, kind, offset in found:
        if kind not in GGML_QUANT_SIZES:
            raise ValueError(f"tensor {name} has unknown ggml type {kind}")
        block, block_bytes = GGML_QUANT_SIZES[GGMLQuantizationType(kind)]
        count = 1
        for dimension in shape:
            count *= dimension
        entry = TensorEntry(name, shape, kind, start + offset, count // block * block_bytes)
        if entry.offset + entry.size > len(data):
            raise ValueError(f"it ends inside tensor {name}")
        index[name] = entry
    return index
