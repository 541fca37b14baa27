"""Row attention in logical order (bita/runtime/logical_attention.py): the Triton kernel, run here under
Triton's interpreter (tests/conftest.py sets TRITON_INTERPRET where no GPU is), equals attention under the
mask, and a row's bits depend only on its query and the keys it sees in their order: not on where they sit
in the cache (prompt slots in front, siblings between), nor on the other rows of its pass."""

import pytest
import torch
import torch.nn.functional as F

from bita.runtime.logical_attention import BLOCK, attend, logical_order

KV_HEADS, GROUPS, DIM = 2, 3, 16


def test_the_order_lists_each_rows_visible_slots_in_slot_order():
    allowed = torch.tensor([[1, 0, 1, 1, 0], [0, 0, 0, 0, 1], [1, 1, 1, 1, 1]], dtype=torch.bool)
    order, counts = logical_order(allowed)
    assert counts.tolist() == [3, 1, 5] and order.dtype == counts.dtype == torch.int32
    assert [row[:count].tolist() for row, count in zip(order, counts)] == [[0, 2, 3], [4], [0, 1, 2, 3, 4]]


@pytest.mark.parametrize("dtype, tolerance", [(torch.float32, 1e-5), (torch.bfloat16, 2e-2)])
def test_it_is_attention_under_the_mask(dtype, tolerance):
    """Rows seeing up to 3 blocks of keys, GQA (3 query heads a key/value head), padding rows seeing one slot."""
    generator = torch.Generator().manual_seed(0)
    slots, rows = 3 * BLOCK + 5, 7
    keys, values = (torch.randn(KV_HEADS, slots, DIM, generator=generator).to(dtype) for _ in "kv")
    query = torch.randn(rows, KV_HEADS * GROUPS, DIM, generator=generator).to(dtype)
    allowed = torch.rand(rows, slots, generator=generator) < 0.7
    allowed[-1] = False
    allowed[-1, 9] = True
    out = attend(query, keys, values, *logical_order(allowed))
    expected = F.scaled_dot_product_attention(query.float().transpose(0, 1), keys.float(), values.float(),
                                              attn_mask=allowed[None], enable_gqa=True).transpose(0, 1)
    assert out.dtype == dtype and out.shape == query.shape
    torch.testing.assert_close(out.float(), expected, atol=tolerance, rtol=tolerance)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_rows_bits_do_not_depend_on_where_its_keys_sit_or_on_its_pass(dtype):
    """As our AR loop computes a row at position p (its keys the cache's slots 0 .. p, alone in its pass) and as
    a BiTA tree pass does (4 prompt slots in front, the context, then the row's path with siblings between,
    among other rows): the same bits, for a context of 1.5 blocks."""
    generator = torch.Generator().manual_seed(1)
    context, path, prompts = BLOCK + BLOCK // 2, 5, 4
    logical_keys, logical_values = (torch.randn(KV_HEADS, context + path, DIM, generator=generator).to(dtype)
                                    for _ in "kv")
    query = torch.randn(1, KV_HEADS * GROUPS, DIM, generator=generator).to(dtype)
    alone = attend(query, logical_keys, logical_values, *logical_order(torch.ones(1, context + path, dtype=torch.bool)))

    slots = prompts + context + 2 * path  # the path's nodes each after a sibling
    where = torch.cat([prompts + torch.arange(context), prompts + context + 1 + 2 * torch.arange(path)])
    keys, values = (torch.randn(KV_HEADS, slots, DIM, generator=generator).to(dtype) for _ in "kv")
    keys[:, where], values[:, where] = logical_keys, logical_values
    allowed = torch.rand(6, slots, generator=generator) < 0.5  # other rows of the pass
    allowed[:, 0] = True
    allowed[3] = False
    allowed[3, where] = True
    queries = torch.randn(6, KV_HEADS * GROUPS, DIM, generator=generator).to(dtype)
    queries[3] = query[0]
    in_tree = attend(queries, keys, values, *logical_order(allowed))
    assert torch.equal(in_tree[3], alone[0])
