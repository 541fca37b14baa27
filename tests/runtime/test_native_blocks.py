"""The native kernels on GGUF blocks (native_blocks.c): each block type the kernels read (Q4_0, Q4_1, Q8_0), written by
gguf-py. In float32 a row's result is the dense float32 kernel's on the de-quantised weight, bit for bit, alone or
among any other rows; in bf16 it is the same alone and among others, and close to a float64 product; so it is by
vdpbf16ps (where the CPU has AVX512-BF16: the dot sweep, integers summed a block at a time, then scaled). The packed
copy is no larger than the file's blocks; what the kernels cannot read is refused or left to the dense paths."""

from dataclasses import replace

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from conftest import forget_native
from gguf import GGMLQuantizationType
from gguf_weights import BLOCK_TYPES, block_weight, write_blocks
from torch import nn

from bita.runtime import kernel_plan, native
from bita.runtime.blocks import BlockSource, blocks_of, with_blocks
from bita.runtime.kernel_plan import BLOCKS, BLOCKS_DOT, NATIVE, products_of, row_floor, weight_copy

SHAPES = ((70, 64), (96, 32), (33, 128), (16, 160))  # [out, in]: outputs off a tile, one block, several, one tile
ROWS = (1, 2, 5, 8, 9, 13, 16, 17, 24)
needs_native = pytest.mark.skipif(native.unavailable() is not None, reason=str(native.unavailable()))
kinds = pytest.mark.parametrize("kind", BLOCK_TYPES, ids=[kind.name for kind in BLOCK_TYPES])


def _inputs(rows: int, shape: tuple[int, int], dtype: torch.dtype, seed: int):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, shape[1], generator=generator).to(dtype)
    bias = torch.randn(shape[0], generator=generator)
    residual = torch.randn(rows, shape[0], generator=generator).to(dtype)
    return x, bias, residual


def _bits(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.view(torch.int16 if tensor.dtype == torch.bfloat16 else torch.int32)


def _check_against(tmp_path, kind, path: str, dense_path: str | None, dtype: torch.dtype) -> None:
    """Each shape, with and without bias and residual: a row alone and among 1..24 rows at varying places (two
    threads) gives the same bits, which are ``dense_path``'s on the de-quantised weight in ``dtype`` (None: close
    to a float64 product)."""
    for index, shape in enumerate(SHAPES):
        weight = block_weight(tmp_path, *shape, kind, seed=index)
        copy = native.pack(with_blocks(weight.to(dtype), blocks_of(weight)), path)
        dense = native.pack(weight.to(dtype), dense_path) if dense_path else None
        x, bias, residual = _inputs(max(ROWS), shape, dtype, seed=index)
        for extra in ((None, None), (bias, residual)):
            alone = torch.cat([native.linear(x[i:i + 1], copy, extra[0], shape[0],
                                             None if extra[1] is None else extra[1][i:i + 1], path)
                               for i in range(len(x))])
            for rows in ROWS:
                start = (5 * rows) % (len(x) - rows + 1)
                part = slice(start, start + rows)
                got = native.linear(x[part], copy, extra[0], shape[0], None if extra[1] is None else extra[1][part],
                                    path)
                assert torch.equal(_bits(got), _bits(alone[part])), f"{shape}, {rows} rows from {start}"
                if dense is not None:
                    expected = native.linear(x[part], dense, extra[0], shape[0],
                                             None if extra[1] is None else extra[1][part], dense_path)
                    assert torch.equal(_bits(got), _bits(expected)), f"{shape}, {rows} rows: not {dense_path}'s bits"
            if dense is None and extra[1] is None:
                product = F.linear(x.double(), weight.double(), None if extra[0] is None else extra[0].double())
                torch.testing.assert_close(alone.double(), product, atol=3e-2, rtol=3e-2)


@needs_native
@kinds
def test_in_float32_a_row_is_the_dense_kernels_row_bit_for_bit(tmp_path, kind):
    _check_against(tmp_path, kind, BLOCKS, NATIVE, torch.float32)


@needs_native
@kinds
def test_in_bf16_a_row_is_the_same_alone_and_among_others(tmp_path, kind):
    _check_against(tmp_path, kind, BLOCKS, None, torch.bfloat16)


@kinds
def test_by_vdpbf16ps_a_row_is_the_same_alone_and_among_others(tmp_path, kind):
    if native.dot_unavailable() is not None:
        pytest.skip(native.dot_unavailable())
    _check_against(tmp_path, kind, BLOCKS_DOT, None, torch.bfloat16)


@needs_native
@kinds
def test_the_packed_copy_is_no_larger_than_the_files_blocks(tmp_path, kind):
    for shape in SHAPES:
        weight = block_weight(tmp_path, *shape, kind)
        source = blocks_of(weight)
        file_bytes = source.raw().nbytes
        padded_rows = -(-shape[0] // native._limits.tile) * native._limits.tile
        assert native.pack(weight, BLOCKS).numel() <= 64 + file_bytes * padded_rows // shape[0]


@needs_native
def test_what_the_kernels_cannot_read_is_left_to_the_dense_paths_or_refused(tmp_path):
    weight = block_weight(tmp_path, 40, 64, GGMLQuantizationType.Q4_1)
    source = blocks_of(weight)
    assert native.pack(weight.clone(), BLOCKS) is None  # no blocks: a dense weight
    other_type = BlockSource(source.file, int(GGMLQuantizationType.Q5_0), source.columns, source.parts,
                             source.file_size)
    assert native.pack(with_blocks(weight.clone(), other_type), BLOCKS) is None
    assert BLOCKS not in kernel_plan.offered_paths(weight.clone())
    assert BLOCKS in kernel_plan.offered_paths(weight)
    with pytest.raises(ValueError, match="blocks of"):
        native.pack(with_blocks(torch.zeros(41, 64), source), BLOCKS)
    short_rows = tuple(replace(part, row_bytes=part.row_bytes - 1) for part in source.parts)  # crafted: would read past
    with pytest.raises(ValueError, match="bytes for a weight"):
        native.pack(with_blocks(weight.clone(), replace(source, parts=short_rows)), BLOCKS)
    packed = native.pack(weight, BLOCKS)
    with pytest.raises(ValueError):  # another weight's copy
        native.linear(torch.randn(2, 64), packed, None, 41, kernel=BLOCKS)
    with open(source.file, "r+b") as handle:  # the file changed since its blocks were found
        handle.truncate(source.file_size - 10)
    with pytest.raises(ValueError, match="changed"):
        native.pack(weight, BLOCKS)


@needs_native
@kinds
def test_a_meta_weight_carrying_blocks_packs_and_the_plan_prices_it_at_floor_1(tmp_path, kind):
    """A linear held in blocks alone keeps its shape as a meta tensor: its blocks path packs from the file."""
    weight = block_weight(tmp_path, 96, 64, kind)
    meta = with_blocks(torch.empty(96, 64, device="meta"), blocks_of(weight))
    assert torch.equal(native.pack(meta, BLOCKS), native.pack(weight, BLOCKS))
    assert row_floor(BLOCKS, meta, None, weight_copy(BLOCKS, meta)) == 1
    layers = products_of([nn.Linear(64, 96)])
    layers = [(with_blocks(layers[0][0], blocks_of(weight)), None)]
    times = kernel_plan.kernel_times(layers, None, (kernel_plan.STOCK, BLOCKS), rows=(1, 4), repeats=1)
    assert set(times["layers"][0]) == {kernel_plan.STOCK, BLOCKS}
    head_only = kernel_plan.kernel_times([], products_of([nn.Linear(64, 96)])[0], (kernel_plan.STOCK, BLOCKS),
                                         rows=(1,), repeats=1)
    assert set(head_only["head"][0]) == {kernel_plan.STOCK}  # a head not held in blocks has no blocks path


@needs_native
@pytest.mark.parametrize("march", ["haswell", "skylake-avx512", "cooperlake"])
def test_each_isa_build(monkeypatch, tmp_path, march):
    """The AVX2 build, the AVX-512 one and the one with AVX512-BF16 (the dot sweep), where this CPU runs them: the
    float32 sweep is the dense float32 kernel's of the same build, bit for bit; the dot sweep is row-invariant."""
    flags = native.cpu_info().get("flags", "").split()
    if march != "haswell" and "avx512f" not in flags or march == "cooperlake" and "avx512_bf16" not in flags:
        pytest.skip(f"this CPU does not run a {march} build")
    forget_native(monkeypatch, march)
    assert native.unavailable(tmp_path / "native") is None
    for kind in BLOCK_TYPES:
        _check_against(tmp_path, kind, BLOCKS, NATIVE, torch.float32)
        if march == "cooperlake":
            _check_against(tmp_path, kind, BLOCKS_DOT, None, torch.bfloat16)


def test_a_fused_product_holds_its_parts_rows_in_order(tmp_path):
    """Q, K and V held in blocks become one product whose rows are theirs one after the other (the lean forward's
    fused weights), and whose blocks de-quantise to that weight."""
    from gguf import dequantize

    from bita.runtime.lean_llama import fused_product
    generator = torch.Generator().manual_seed(0)
    found = write_blocks(tmp_path / "qkv.gguf", {name: torch.randn(rows, 64, generator=generator).numpy()
                                                 for name, rows in (("q", 64), ("k", 32), ("v", 32))},
                         GGMLQuantizationType.Q4_1)
    modules = []
    for source, values in found.values():
        module = nn.Linear(64, values.shape[0], bias=False)
        module.weight.data.copy_(values)
        module.bita_blocks = source
        modules.append(module)
    parts = [values for _, values in found.values()]
    weight, _ = fused_product(modules)
    source = blocks_of(weight)
    assert source.rows == 128 and torch.equal(weight, torch.cat(parts))
    values = torch.from_numpy(np.array(dequantize(source.raw(), GGMLQuantizationType.Q4_1)))
    assert torch.equal(values, weight)
