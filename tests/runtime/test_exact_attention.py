"""Row-invariant attention: a tree row's output is bitwise the output of the same row alone in an AR
pass, wherever its keys sit, whatever the other rows; and it is softmax attention."""

import pytest
import torch
import torch.nn.functional as F

from bita.runtime.exact_attention import CHUNK, exact_attention, exact_layout
from bita.runtime.layer_masks import windowed

SHAPES = [(3, 3, 64), (2, 2, 16), (1, 8, 32)]  # kv_heads, query heads per kv head, head_dim


def tree_pass(generator, parents, masks, base, context, dtype, kv_heads, dim):
    """A cache of ``base`` prompt slots, ``context`` cached keys, then a pass: the root, nodes with
    ``parents`` (-1: the root), and ``masks`` mask rows seeing the prompt slots and the root. Returns
    keys, values [kv, capacity, d], allowed [R, base + context + R], each node's path of slots."""
    rows = 1 + len(parents) + masks
    capacity = base + context + rows + 2 * CHUNK
    keys = torch.randn(kv_heads, capacity, dim, generator=generator).to(dtype)
    values = torch.randn(kv_heads, capacity, dim, generator=generator).to(dtype)
    start = base + context
    allowed = torch.zeros(rows, start + rows, dtype=torch.bool)
    allowed[:, base:start] = True
    paths = [[start]]
    for node, parent in enumerate(parents):
        paths.append(paths[parent + 1] + [start + 1 + node])
    for row, path in enumerate(paths):
        allowed[row, path] = True
    for mask in range(masks):
        row = len(paths) + mask
        allowed[row, :base] = True
        allowed[row, [start, start + row]] = True
    return keys, values, allowed, paths


def alone(query_row, keys, values, base, context, path, dtype, window):
    """The same row in an AR pass: no prompt slots, its keys contiguous, the pass's only row (seeing the
    last ``window`` of them; None: all)."""
    order = list(range(base, base + context)) + path
    capacity = len(order) + 2 * CHUNK
    ar_keys = torch.zeros(keys.shape[0], capacity, keys.shape[2], dtype=dtype)
    ar_values = torch.zeros_like(ar_keys)
    ar_keys[:, :len(order)], ar_values[:, :len(order)] = keys[:, order], values[:, order]
    allowed = torch.ones(1, len(order), dtype=torch.bool)
    positions = torch.arange(len(order))
    seen = windowed(allowed, positions[-1:], positions, window)
    layout = exact_layout(allowed, 1, 0, query_row.shape[0] // keys.shape[0], windowed=seen)
    return exact_attention(query_row[None], ar_keys, ar_values, layout)[0]


def pass_window(allowed, paths, base, context, window):
    """What a sliding-window layer's rows see of a ``tree_pass``: a row at depth d sits at position
    context + d, a pass slot holds its row's position, the prompt slots are never windowed."""
    depths = torch.tensor([len(path) - 1 for path in paths] + [1] * (allowed.shape[0] - len(paths)))
    rows = context + depths
    return windowed(allowed, rows, torch.cat([torch.arange(context), rows]), window)


@pytest.mark.parametrize("window", [None, 7, CHUNK + 3])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("kv_heads,groups,dim", SHAPES)
def test_a_tree_row_attends_bitwise_as_it_does_alone(dtype, kv_heads, groups, dim, window):
    """Contexts from 1 key to past several chunks, trees whose paths cross a chunk boundary, mask rows
    beside them, sliding windows hiding the earliest keys: every root and node row equals its AR row
    exactly (many rows: a single row hides differences of accumulation order)."""
    generator = torch.Generator().manual_seed(0)
    parents = [-1, 0, 1, -1, 0, 3, 2, 6, 4]  # a chain of 5 with siblings hanging off it
    compared = 0
    for context in [1, 5, CHUNK - 3, CHUNK - 1, CHUNK, CHUNK + 7, 3 * CHUNK - 2, 300]:
        for base in (0, 4, 16):
            keys, values, allowed, paths = tree_pass(generator, parents, 3, base, context, dtype, kv_heads, dim)
            rows = allowed.shape[0]
            query = torch.randn(rows, kv_heads * groups, dim, generator=generator).to(dtype)
            tokens = len(paths)  # the pass's first rows; mask rows after them
            layout = exact_layout(allowed, tokens, base, groups,
                                  windowed=pass_window(allowed, paths, base, context, window))
            together = exact_attention(query[:tokens], keys, values, layout)
            for row, path in enumerate(paths):
                single = alone(query[row], keys, values, base, context, path, dtype, window)
                assert torch.equal(together[row], single), (context, base, row)
                compared += 1
    assert compared == 8 * 3 * 10


@pytest.mark.parametrize("kv_heads,groups,dim", SHAPES)
def test_exact_attention_is_softmax_attention(kv_heads, groups, dim):
    """Within float32 rounding of SDPA on the same mask (prompt slots hidden, siblings hidden)."""
    generator = torch.Generator().manual_seed(1)
    keys, values, allowed, paths = tree_pass(generator, [-1, 0, -1, 1], 0, 8, 150, torch.float32, kv_heads, dim)
    query = torch.randn(len(paths), kv_heads * groups, dim, generator=generator)
    ours = exact_attention(query, keys, values, exact_layout(allowed, len(paths), 8, groups))
    width = allowed.shape[1]
    reference = F.scaled_dot_product_attention(query.transpose(0, 1)[None], keys[None, :, :width],
                                               values[None, :, :width], attn_mask=allowed[None, None],
                                               enable_gqa=True)[0].transpose(0, 1)
    torch.testing.assert_close(ours, reference, atol=1e-5, rtol=1e-5)


def test_exact_attention_is_eager_attention_with_a_window_scaling_and_soft_capping():
    """Gemma 2's attention (scores scaled, soft-capped, then masked) under a window, on a cache that holds
    only its valid slots (the region past its end reads as zeros): within float32 rounding."""
    generator = torch.Generator().manual_seed(2)
    kv_heads, groups, dim, scaling, cap = 2, 2, 16, 0.3, 5.0
    keys, values, allowed, paths = tree_pass(generator, [-1, 0, -1, 1], 0, 4, 100, torch.float32, kv_heads, dim)
    seen = pass_window(allowed, paths, 4, 100, 9)
    query = torch.randn(len(paths), kv_heads * groups, dim, generator=generator)
    width = allowed.shape[1]
    keys, values = keys[:, :width], values[:, :width]
    ours = exact_attention(query, keys, values, exact_layout(allowed, len(paths), 4, groups,
                                                             windowed=seen), scaling, cap)
    scores = torch.einsum("rhd,hkd->hrk", query, keys.repeat_interleave(groups, 0)) * scaling
    scores = (torch.tanh(scores / cap) * cap).masked_fill(~seen[:len(paths)], float("-inf"))
    reference = torch.einsum("hrk,hkd->rhd", scores.softmax(-1), values.repeat_interleave(groups, 0))
    torch.testing.assert_close(ours, reference, atol=1e-5, rtol=1e-5)


def test_a_row_that_misses_the_first_context_slot_is_refused():
    allowed = torch.zeros(2, 10, dtype=torch.bool)
    allowed[:, 5:] = True
    with pytest.raises(ValueError, match="first context slot"):
        exact_layout(allowed, 2, 4, 1)
