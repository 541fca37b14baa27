"""The verification walks, greedy and sampled, the sampling settings and the target distribution: pure, no model.

The walk's output on a hand-made tree is checked against the exact distribution of its
emitted tokens (AR sampling stopped at the tree's edge) by a chi-square goodness-of-fit test
at ALPHA; two wrong updates after a rejection fail the same test.
"""

from collections import Counter, defaultdict

import pytest
import torch
from chi_square import goodness_of_fit

from bita.decode.sampling import GREEDY, Sampling, next_token, target_probs
from bita.decode.verify import verify_greedy, verify_sampling, zero_and_renormalise
from bita.drafts.tree import ROOT, efficient_tree, full_tree
from bita.errors import BitaError

ALPHA = 1e-3  # a correct walk fails a test with probability ALPHA; the draws are seeded, so CI is deterministic
DRAWS = 20_000

pytestmark = pytest.mark.usefixtures("one_thread")

# efficient:3,2 over 6 tokens: depth 1 tries 0, 1, 2 in that order; below node 0 (token 0), 3 then 4.
TREE = efficient_tree([3, 2])
CANDIDATES = [0, 1, 2, 3, 4]
PROBS = torch.tensor([
    [0.30, 0.25, 0.15, 0.10, 0.10, 0.10],  # root
    [0.20, 0.05, 0.10, 0.35, 0.20, 0.10],  # node 0 (token 0): its children are tokens 3 and 4
    [0.10, 0.10, 0.20, 0.20, 0.20, 0.20],  # node 1, a leaf
    [0.50, 0.00, 0.00, 0.00, 0.00, 0.50],  # node 2, a leaf
    [0.00, 0.40, 0.00, 0.10, 0.30, 0.20],  # node 3, a leaf (depth 2)
    [0.25, 0.25, 0.25, 0.25, 0.00, 0.00],  # node 4, a leaf (depth 2)
])
PLAIN = Sampling(temperature=1.0, seed=0)  # log-probabilities at temperature 1 give back PROBS


def exact_emissions(tree, candidates, probs) -> dict[tuple[int, ...], float]:
    """P(emitted tokens) of AR sampling that stops at the first token leaving the tree."""
    law: dict[tuple[int, ...], float] = defaultdict(float)

    def walk(node, prefix, weight):
        below = {candidates[c]: c for c in tree.children.get(node, ())}
        for token, p in enumerate(probs[1 + node].tolist()):
            if token in below:
                walk(below[token], prefix + (token,), weight * p)
            elif p > 0:
                law[prefix + (token,)] += weight * p

    walk(ROOT, (), 1.0)
    return dict(law)


def emitted_counts(residual, draws=DRAWS, seed=0) -> Counter:
    generator = torch.Generator().manual_seed(seed)
    logits = PROBS.log()
    counts = Counter()
    for _ in range(draws):
        verdict = verify_sampling(TREE, CANDIDATES, logits, PLAIN, generator, residual)
        counts[tuple(CANDIDATES[i] for i in verdict.accepted) + (verdict.bonus,)] += 1
    return counts


def keep_unchanged(probs, rejected):
    """Wrong: a rejected candidate keeps its mass, so it may come back as the bonus."""
    return probs


def zero_without_renormalising(probs, rejected):
    """Wrong: later siblings are tried against their unconditional probability."""
    kept = probs.clone()
    kept[rejected] = 0.0
    return kept


def test_exact_law_is_a_distribution_over_the_paths():
    law = exact_emissions(TREE, CANDIDATES, PROBS)
    assert sum(law.values()) == pytest.approx(1.0)
    assert law[(0, 3, 1)] == pytest.approx(0.30 * 0.35 * 0.40) and (0, 0) in law and (2, 1) not in law


def test_walk_samples_the_exact_distribution():
    result = goodness_of_fit(emitted_counts(zero_and_renormalise), exact_emissions(TREE, CANDIDATES, PROBS))
    print(f"correct walk, {DRAWS} draws: {result}")
    assert result.p_value > ALPHA and result.cells >= 20


@pytest.mark.parametrize("residual", [keep_unchanged, zero_without_renormalising])
def test_wrong_residual_fails_the_same_test(residual):
    result = goodness_of_fit(emitted_counts(residual), exact_emissions(TREE, CANDIDATES, PROBS))
    print(f"{residual.__name__}, {DRAWS} draws: {result}")
    assert result.p_value < 1e-12


@pytest.mark.parametrize("shape", [efficient_tree([3, 2, 2]), full_tree([2, 2, 2]), efficient_tree([1, 1, 1])])
def test_near_zero_temperature_walks_like_greedy(shape):
    """At temperature 0.01 with logit gaps of at least 1, every draw picks the argmax (up to e^-100)."""
    generator, cold = torch.Generator().manual_seed(1), Sampling(temperature=0.01, seed=0)
    for trial in range(40):
        logits = torch.stack([torch.randperm(8, generator=generator).float() for _ in range(1 + shape.size)])
        tops = logits.topk(3).indices.tolist()
        candidates = [tops[1 + node.parent][node.rank % 3] for node in shape.nodes]
        greedy = verify_greedy(shape, candidates, logits.argmax(-1).tolist())
        assert verify_sampling(shape, candidates, logits, cold, cold.generator()) == greedy


def test_target_probs_apply_temperature_then_top_k_then_top_p():
    logits = torch.tensor([[4.0, 3.0, 2.0, 1.0, 0.0]])
    assert torch.allclose(target_probs(logits, Sampling(1.0, seed=0)), torch.softmax(logits, -1))
    assert torch.allclose(target_probs(logits, Sampling(0.5, seed=0)), torch.softmax(2 * logits, -1))
    top2 = target_probs(logits, Sampling(1.0, top_k=2, seed=0))
    assert torch.allclose(top2, torch.softmax(torch.tensor([[4.0, 3.0, -1e9, -1e9, -1e9]]), -1))
    # p = .64 .24 .09 .03 .01 at temperature 1; top-p 0.8 keeps the two tokens that reach 0.8
    assert (target_probs(logits, Sampling(1.0, top_p=0.8, seed=0)) > 0).tolist() == [[True, True, False, False, False]]
    # temperature 2 first flattens p (.43 .26 .16 .10 .06), so top-p 0.8 then keeps three
    assert (target_probs(logits, Sampling(2.0, top_p=0.8, seed=0)) > 0).sum() == 3
    # top-k 3 first renormalises (.67 .24 .09), so top-p 0.9 then keeps two (top-p first would keep three)
    assert (target_probs(logits, Sampling(1.0, top_k=3, top_p=0.9, seed=0)) > 0).sum() == 2


def test_greedy_next_token_is_the_argmax():
    logits = torch.tensor([0.1, 2.0, -1.0, 1.9])
    assert GREEDY.greedy and GREEDY.generator() is None and next_token(logits, GREEDY, None) == 1


def test_seed_is_drawn_once_and_reproduces():
    sampling = Sampling(temperature=0.8)
    assert isinstance(sampling.seed, int) and Sampling(0.8, seed=sampling.seed) == sampling
    first, second = sampling.generator(), sampling.generator()
    assert torch.equal(torch.rand(5, generator=first), torch.rand(5, generator=second))
    assert len({Sampling(temperature=0.8).seed for _ in range(4)}) > 1  # unseeded runs differ
    assert GREEDY.seed is None and "seed" in sampling.describe() and GREEDY.describe() == "greedy"


def test_generators_of_two_requests_share_no_state():
    sampling = Sampling(1.0, seed=7)
    alone = torch.rand(6, generator=sampling.generator())
    mine, theirs = sampling.generator(), Sampling(1.0, seed=7).generator()
    interleaved = []
    for _ in range(6):
        interleaved.append(torch.rand((), generator=mine))
        torch.rand(3, generator=theirs)
        torch.rand(3)  # the global generator neither
    assert torch.equal(torch.stack(interleaved), alone)


@pytest.mark.parametrize("settings,message", [
    (dict(temperature=-0.5), "temperature must be"), (dict(temperature=1e6), "temperature must be"),
    (dict(temperature=float("nan")), "temperature must be"), (dict(temperature=0.001), "temperature must be"),
    (dict(temperature="hot"), "temperature must be"), (dict(temperature=True), "temperature must be"),
    (dict(temperature=1.0, top_p=0.0), "top_p must be"), (dict(temperature=1.0, top_p=1.5), "top_p must be"),
    (dict(temperature=1.0, top_k=-1), "top_k must be"), (dict(temperature=1.0, top_k=2.5), "top_k must be"),
    (dict(temperature=1.0, seed=-3), "seed must be"), (dict(temperature=1.0, seed=2**64), "seed must be"),
    (dict(temperature=1.0, seed="abc"), "seed must be"),
])
def test_absurd_settings_are_refused_clearly(settings, message):
    with pytest.raises(BitaError, match=message):
        Sampling(**settings)


def test_verify_accepts_chain_then_bonus():
    tree = efficient_tree([2, 2])  # nodes: 0 (d1 r0), 1 (d1 r1), 2 (d2 r0), 3 (d2 r1)
    candidates = [10, 11, 20, 21]
    # root predicts 10, node 0 predicts 20, node 2 predicts 30 (bonus)
    verdict = verify_greedy(tree, candidates, [10, 20, 99, 30, 99])
    assert verdict.accepted == (0, 2) and verdict.bonus == 30 and verdict.last == 2


def test_verify_sibling_match_stops_at_the_sibling():
    tree = efficient_tree([2, 2])
    verdict = verify_greedy(tree, [10, 11, 20, 21], [11, 99, 42, 99, 99])
    assert verdict.accepted == (1,) and verdict.bonus == 42 and verdict.last == 1


def test_verify_rejects_everything_and_emits_the_ar_token():
    tree = efficient_tree([2, 2])
    verdict = verify_greedy(tree, [10, 11, 20, 21], [7, 0, 0, 0, 0])
    assert verdict.accepted == () and verdict.bonus == 7 and verdict.last == ROOT


def test_verify_walks_any_branch_of_a_full_tree():
    tree = full_tree([2, 2])  # 0,1 at depth 1; 2,3 children of 0; 4,5 children of 1
    candidates = [10, 11, 20, 21, 20, 21]
    verdict = verify_greedy(tree, candidates, [11, 0, 21, 0, 0, 0, 5])
    assert verdict.accepted == (1, 5) and verdict.bonus == 5
