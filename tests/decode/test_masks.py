"""Pass layouts, key visibility and the packed training mask: pure, no model."""

import random

import pytest
import torch

from bita.decode.masks import allowed_keys, decode_layout, packed_groups
from bita.drafts.tree import EMPTY_TREE, ROOT, parse_tree_spec
from bita.drafts.trie import NGRAM_GROUPS, build_trie
from bita.runtime.layer_masks import additive_mask


def test_prefill_layout_is_causal_prompt_plus_one_group():
    layout = decode_layout(EMPTY_TREE, 3, chain=5)
    assert layout.rows == 8 and layout.root_row == 4
    assert torch.equal(layout.position_offsets, torch.tensor([-4, -3, -2, -1, 0, 1, 2, 3]))
    assert torch.equal(layout.visible[:5, :5], torch.ones(5, 5, dtype=torch.bool).tril())
    assert not layout.visible[:5, 5:].any()  # prompt never sees masks
    assert torch.equal(layout.visible[5:, 5:], torch.ones(3, 3, dtype=torch.bool).tril())
    assert layout.visible[5:, :5].all()


def test_tree_layout_rules():
    tree = parse_tree_spec("efficient:3,2,2")
    n = 3
    layout = decode_layout(tree, n)
    assert layout.rows == 1 + tree.size + (1 + tree.size) * n
    ordinary = ~layout.is_mask
    assert not layout.visible[ordinary][:, layout.is_mask].any(), "ordinary rows never see masks"
    for i, node in enumerate(tree.nodes):
        row = layout.node_row(i)
        expected = {0} | {layout.node_row(a) for a in tree.ancestors(i)}
        assert set(layout.visible[row].nonzero().flatten().tolist()) == expected
        assert layout.position_offsets[row] == node.depth
    for g, anchor in enumerate(tree.group_anchors):
        rows = layout.group_rows[g]
        anchor_depth = 0 if anchor == ROOT else tree.nodes[anchor].depth
        path = {0} | ({layout.node_row(a) for a in tree.ancestors(anchor)} if anchor != ROOT else set())
        for i, row in enumerate(rows.tolist()):
            assert layout.position_offsets[row] == anchor_depth + 1 + i
            assert set(layout.visible[row].nonzero().flatten().tolist()) == path | set(rows[: i + 1].tolist())


@pytest.mark.parametrize("chain", [1, 4])
def test_layouts_of_tries_merged_with_chains_follow_the_rules(chain):
    """Tries of a mask tree merged with n-gram chains (new shapes, groups on chain nodes), after a chain of ordinary
    rows: each row sees the chain causally, a node its ancestors and itself, a mask its anchor's path and the masks
    before it in its group; offsets are depths."""
    generator = random.Random(5)
    for spec in ("efficient:4,3,2", "full:2,2,2", "chain:3"):
        for _ in range(10):
            drafts = [[generator.randrange(6) for _ in range(4)] for _ in range(3)]
            chain_tokens = [generator.randrange(6) for _ in range(generator.randrange(5))]
            tree = build_trie(parse_tree_spec(spec), drafts, chain_tokens, generator.choice(NGRAM_GROUPS)).tree
            layout, n = decode_layout(tree, 3, chain), 3
            chain_rows = set(range(chain))
            expected = [set(range(row + 1)) for row in range(chain)]
            offsets = list(range(1 - chain, 1))
            for index, node in enumerate(tree.nodes):
                expected.append(chain_rows | {chain + a for a in tree.ancestors(index)} | {chain + index})
                offsets.append(node.depth)
            for group, anchor in enumerate(tree.group_anchors):
                path = expected[chain - 1] if anchor == ROOT else expected[chain + anchor]
                depth = 0 if anchor == ROOT else tree.nodes[anchor].depth
                for i in range(n):
                    first = chain + tree.size + group * n
                    expected.append(path | set(range(first, first + i + 1)))
                    offsets.append(depth + 1 + i)
            assert [set(row.nonzero().flatten().tolist()) for row in layout.visible] == expected
            assert layout.position_offsets.tolist() == offsets
            assert layout.is_mask.tolist() == [row >= chain + tree.size for row in range(layout.rows)]


def test_allowed_keys_hide_prompt_slots_from_ordinary_rows():
    layout = decode_layout(parse_tree_spec("chain:2"), 2)
    allowed = allowed_keys(layout, n_prompt=4, n_cached=6)
    assert allowed.shape == (layout.rows, 4 + 6 + layout.rows)
    assert torch.equal(allowed[:, :4].all(1), layout.is_mask)
    assert not allowed[~layout.is_mask, :4].any()
    assert allowed[:, 4:10].all() and torch.equal(allowed[:, 10:], layout.visible)
    assert torch.equal(allowed_keys(layout, n_prompt=0, n_cached=0), layout.visible)
    bias = additive_mask(allowed, torch.float32, "cpu")
    assert bias.shape == (1, 1, *allowed.shape)
    assert (bias[0, 0][allowed] == 0).all() and (bias[0, 0][~allowed] == torch.finfo(torch.float32).min).all()


def test_packed_groups_visibility_and_targets():
    anchors = torch.tensor([[2, 5, -1]])
    packed = packed_groups(anchors, n_masks=2, seq_len=8)
    assert torch.equal(packed.positions, torch.tensor([[3, 4, 6, 7, 0, 1]]))
    assert torch.equal(packed.target_index, torch.tensor([[4, 5, 7, 8, 1, 2]]))
    assert packed.visible_ordinary[0, 0].tolist() == [True] * 3 + [False] * 5
    assert packed.visible_ordinary[0, 3].tolist() == [True] * 6 + [False] * 2
    assert not packed.visible_ordinary[0, 4:].any(), "an unused group sees no ordinary token"
    expected = torch.tensor([[1, 0, 0, 0, 0, 0], [1, 1, 0, 0, 0, 0], [0, 0, 1, 0, 0, 0],
                             [0, 0, 1, 1, 0, 0], [0, 0, 0, 0, 1, 0], [0, 0, 0, 0, 1, 1]], dtype=torch.bool)
    assert torch.equal(packed.visible_masks, expected)


def test_cached_layouts_built_while_decoding_stay_usable_by_autograd():
    tree = parse_tree_spec("chain:2")
    decode_layout.cache_clear()
    with torch.inference_mode():
        decode_layout(tree, 2)
    layout = decode_layout(tree, 2)
    weights = torch.ones(layout.rows, requires_grad=True)
    (weights[layout.position_offsets] * 2).sum().backward()  # fails on inference tensors
    assert not layout.position_offsets.is_inference()
