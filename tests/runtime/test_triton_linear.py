"""Fixed-tile linears (bita/runtime/triton_linear.py), run here under Triton's interpreter: the product torch
computes, within rounding, with and without a bias; and a row's bits the same alone, among rows of the
same tile, and in another tile of a longer product."""

import pytest
import torch
import torch.nn.functional as F

from bita.runtime import triton_linear

TOLERANCES = {torch.float32: 1e-5, torch.bfloat16: 2e-2}


@pytest.mark.parametrize("dtype", list(TOLERANCES))
def test_it_is_the_product_with_and_without_a_bias(dtype):
    """Sizes that are not multiples of the tiles: 37 rows, 100 outputs, 90 inputs (rows 130 apart)."""
    generator = torch.Generator().manual_seed(0)
    wide, weight, bias = (torch.randn(*shape, generator=generator).to(dtype) for shape in ((37, 130), (100, 90), (100,)))
    x = wide[:, :90]
    tolerance = TOLERANCES[dtype]
    torch.testing.assert_close(triton_linear.linear(x, weight), F.linear(x, weight), atol=tolerance, rtol=tolerance)
    torch.testing.assert_close(triton_linear.linear(x, weight, bias), F.linear(x, weight, bias), atol=tolerance,
                               rtol=tolerance)


@pytest.mark.parametrize("dtype", list(TOLERANCES))
def test_a_rows_bits_do_not_depend_on_the_rows_beside_it(dtype):
    generator = torch.Generator().manual_seed(1)
    weight, bias = torch.randn(80, 70, generator=generator).to(dtype), torch.randn(80, generator=generator).to(dtype)
    rows = torch.randn(40, 70, generator=generator).to(dtype)
    among = triton_linear.linear(rows, weight, bias)
    for index in (0, 5, 20, 39):  # the first tile of 16 rows, and the second and third
        assert torch.equal(triton_linear.linear(rows[index:index + 1], weight, bias)[0], among[index])
    moved = torch.randn(40, 70, generator=generator).to(dtype)
    moved[33] = rows[5]
    assert torch.equal(triton_linear.linear(moved, weight, bias)[33], among[5])
