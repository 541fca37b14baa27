"""The walk as tensor operations (bita/decode/device_walk.py) against the walk in Python (verify.py): the same
accepted path, bonus and next drafts on every kind of tree, greedy and sampled, on a CPU; its rules as torch
operations and as one Triton kernel (walk_kernel.py, under Triton's interpreter here: tests/conftest.py)."""

import pytest
import torch

from bita.decode.device_walk import decided_by_kernel, decided_by_torch, kernel_disagrees, queue_walk, tree_tensors
from bita.decode.mask_drafts import draft_choice, raced_vectors
from bita.decode.sampling import GREEDY, RaceNoise, Sampling
from bita.decode.verify import ahead_of, per_position, verify_greedy, verify_sampling
from bita.drafts.tree import ROOT, DraftTree, TreeNode, efficient_tree, full_tree
from bita.drafts.trie import build_trie

VOCAB, K = 50, 3

TREES = {
    "efficient": efficient_tree([3, 2, 2]),
    "full": full_tree([2, 2, 2]),
    "wide": full_tree([3, 3, 3]),  # 39 nodes: more than the kernel's smallest block of 16
    "chain": efficient_tree([1, 1, 1, 1]),
    "trie with chains": build_trie(efficient_tree([2, 2]), [[5, 6], [7, 8]], [5, 9, 10], corpus=[11, 12]).tree,
    "siblings with one token": DraftTree((TreeNode(ROOT, 1, 0, True), TreeNode(ROOT, 1, 1, True),
                                          TreeNode(1, 2, 0, False), TreeNode(0, 2, 0, False))),
}


def planted(tree: DraftTree, generator: torch.Generator) -> tuple[tuple[int, ...], torch.Tensor]:
    """Candidate tokens and logits [1 + N, V] where a random path's candidates are each row's argmax (so walks go
    deep), siblings mostly distinct (the last tree repeats one token among siblings)."""
    tokens = [int(t) for t in torch.randint(0, VOCAB, (tree.size,), generator=generator)]
    if tree is TREES["siblings with one token"]:
        tokens[1] = tokens[0]
    logits = torch.randn(1 + tree.size, VOCAB, generator=generator)
    row = 0
    while (children := tree.children.get(row - 1 if row else ROOT, ())) and torch.rand((), generator=generator) < 0.8:
        child = children[int(torch.randint(0, len(children), (), generator=generator))]
        logits[row, tokens[child]] += 8.0
        row = 1 + child
    return tuple(tokens), logits


DECIDERS = {"torch": decided_by_torch, "kernel": decided_by_kernel}


@pytest.mark.parametrize("decider", DECIDERS)
@pytest.mark.parametrize("sampling", [GREEDY, Sampling(temperature=0.9, top_p=0.9, top_k=20, seed=3)],
                         ids=["greedy", "sampled"])
@pytest.mark.parametrize("name", TREES)
def test_the_device_walk_accepts_what_the_walk_in_python_accepts(name, sampling, decider):
    """The same verdict, and the same next drafts: greedy the most probable, sampled raced with the vectors of the
    positions after the bonus (the two walks' noises are the same request's, drawn apart)."""
    tree, generator = TREES[name], torch.Generator().manual_seed(len(name))
    groups = len(tree.group_anchors)
    for case in range(25):
        tokens, logits = planted(tree, generator)
        every = torch.randn(groups, 2, VOCAB, generator=generator)
        noises = [None if sampling.greedy else RaceNoise(sampling.generator(), 10 + case) for _ in range(2)]
        rows = [None if noise is None else per_position(noise, tree, 11 + case) for noise in noises]
        aheads = [None if noise is None else ahead_of(noise, 11 + case) for noise in noises]
        if sampling.greedy:
            expected = verify_greedy(tree, tokens, logits.argmax(-1).tolist())
        else:
            expected = verify_sampling(tree, tokens, logits, sampling, rows[0])
        verdict, drafts = queue_walk(tree, tokens, logits, every, K, sampling, rows[1], DECIDERS[decider],
                                     aheads[1]).read()
        assert verdict == expected
        if expected.last != ROOT and not tree.nodes[expected.last].has_group:
            assert drafts is None
        else:
            vectors = raced_vectors(aheads[0], len(expected.accepted), 2, VOCAB)
            probs, top = draft_choice(every[tree.group_anchors.index(expected.last)], K, sampling, vectors)
            assert torch.equal(drafts[0], top) and torch.equal(drafts[1], probs)


@pytest.mark.parametrize("decider", DECIDERS)
def test_an_empty_tree_takes_the_roots_choice_and_group(decider):
    tree, logits, every = DraftTree(()), torch.randn(1, VOCAB), torch.randn(1, 2, VOCAB)
    verdict, drafts = queue_walk(tree, (), logits, every, K, GREEDY, None, DECIDERS[decider]).read()
    assert verdict.accepted == () and verdict.last == ROOT and verdict.bonus == int(logits[0].argmax())
    assert torch.equal(drafts[0], every[0].topk(K, -1).indices)


def test_tree_tensors_describe_parents_ancestry_siblings_and_groups():
    tree = efficient_tree([2, 2], chain_groups_only=True)  # nodes: 0 (chain), 1 (rank 1), 2 (chain), 3 (rank 1)
    tensors = tree_tensors(tree, torch.device("cpu"))
    assert tensors.parent_row.tolist() == [0, 0, 1, 1] and tensors.depth.tolist() == [1, 1, 2, 2]
    assert tensors.ancestry[2].tolist() == [1, 0, 1, 0]
    assert tensors.earlier_sibling[1].tolist() == [1, 0, 0, 0] and not tensors.earlier_sibling[0].any()
    assert tensors.group.tolist() == [0, 1, -1, 2, -1]


def test_the_kernel_agrees_with_the_torch_operations_in_its_own_check():
    assert kernel_disagrees(torch.device("cpu"), cases=3) is None


def test_a_kernel_that_fails_or_decides_otherwise_is_not_used(monkeypatch):
    import bita.decode.device_walk as device_walk

    def failing(tensors, tokens, chosen):
        raise RuntimeError("no such kernel image")

    monkeypatch.setattr(device_walk, "decided_by_kernel", failing)
    assert "failed" in kernel_disagrees(torch.device("cpu"), cases=1)
    nothing_accepted = torch.zeros(3, dtype=torch.long)
    monkeypatch.setattr(device_walk, "decided_by_kernel", lambda tensors, tokens, chosen: nothing_accepted)
    assert "decided [0, 0, 0]" in kernel_disagrees(torch.device("cpu"), cases=5)
