"""The verification walks, greedy and sampled, the sampling settings, the target distribution and the race noise:
pure, no model.

The sampled walk's output on a hand-made tree is checked against the exact distribution of its
emitted tokens (AR sampling stopped at the tree's edge) by a chi-square goodness-of-fit test
at ALPHA; one race vector shared by every row of a pass fails the same test. ``torch.multinomial``
is checked to be the exponential race our AR loop and the walk compute, draw for draw.
"""

from collections import Counter, defaultdict

import pytest
import torch
from chi_square import goodness_of_fit

from bita.decode.sampling import GREEDY, RaceNoise, Sampling, next_token, race_winner, target_probs
from bita.decode.verify import per_position, verify_greedy, verify_sampling
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


def one_vector_per_pass(noise, tree, first):
    """Wrong: every row of the pass races against one vector (the root's position's)."""
    return lambda row, size: noise.vector(first, size)


def walks(coupling=per_position, draws=DRAWS, seed=0) -> list:
    """``draws`` walks over TREE, one request's noise going on from walk to walk (a walk emits its
    accepted tokens and the bonus, as a decoder's pass does)."""
    noise, first, logits, verdicts = RaceNoise(torch.Generator().manual_seed(seed), 0), 0, PROBS.log(), []
    for _ in range(draws):
        verdicts.append(verify_sampling(TREE, CANDIDATES, logits, PLAIN, coupling(noise, TREE, first)))
        first += len(verdicts[-1].accepted) + 1
        noise.forget(first)
    return verdicts


def emitted_counts(coupling=per_position, draws=DRAWS, seed=0) -> Counter:
    return Counter(tuple(CANDIDATES[i] for i in v.accepted) + (v.bonus,) for v in walks(coupling, draws, seed))


def test_exact_law_is_a_distribution_over_the_paths():
    law = exact_emissions(TREE, CANDIDATES, PROBS)
    assert sum(law.values()) == pytest.approx(1.0)
    assert law[(0, 3, 1)] == pytest.approx(0.30 * 0.35 * 0.40) and (0, 0) in law and (2, 1) not in law


def test_walk_samples_the_exact_distribution():
    result = goodness_of_fit(emitted_counts(), exact_emissions(TREE, CANDIDATES, PROBS))
    print(f"correct walk, {DRAWS} draws: {result}")
    assert result.p_value > ALPHA and result.cells >= 20


def test_one_vector_for_every_row_of_a_pass_fails_the_same_test():
    result = goodness_of_fit(emitted_counts(one_vector_per_pass), exact_emissions(TREE, CANDIDATES, PROBS))
    print(f"one vector per pass, {DRAWS} draws: {result}")
    assert result.p_value < 1e-12


def test_a_child_is_accepted_with_its_probability():
    """Child x of the root is accepted with probability p(x) (siblings: the sum), and token 3 below
    node 0 with p_node0(3): within 4.5 standard errors over DRAWS walks."""
    verdicts = walks(seed=3)
    below = [v for v in verdicts if v.accepted[:1] == (0,)]
    checks = [(sum(v.accepted[:1] == (child,) for v in verdicts), len(verdicts), float(PROBS[0, child]))
              for child in range(3)]
    checks.append((sum(v.accepted[:1] == (0,) for v in verdicts), len(verdicts), 0.30))
    checks.append((sum(bool(v.accepted) for v in verdicts), len(verdicts), 0.30 + 0.25 + 0.15))
    checks.append((sum(v.accepted == (0, 3) for v in below), len(below), 0.35))
    for hits, n, p in checks:
        assert abs(hits / n - p) < 4.5 * (p * (1 - p) / n) ** 0.5, (hits, n, p)


@pytest.mark.parametrize("size,dtype", [(49_152, torch.float32), (16, torch.float32), (2, torch.float32),
                                        (1_000, torch.float64), (1_000, torch.bfloat16)])
def test_multinomial_is_the_exponential_race(size, dtype):
    """``torch.multinomial(p, 1)`` (HF's draw) = argmax(p / E), E = ``torch.empty_like(p).exponential_(1)``
    from the same generator, which it leaves where that one draw leaves it: so the draws after stay aligned."""
    source, theirs, ours = (torch.Generator().manual_seed(seed) for seed in (5, 9, 9))
    for draw in range(60):
        logits = torch.randn(size, generator=source) * (1 + draw % 4)
        probs = torch.softmax(logits, -1)
        if draw % 3 == 0:  # a top-k or top-p cut: zeros
            probs[logits < logits.median()] = 0
        probs = probs.to(dtype)
        drawn = int(torch.multinomial(probs, 1, generator=theirs))
        assert drawn == race_winner(probs, torch.empty_like(probs).exponential_(1, generator=ours))
        assert torch.equal(theirs.get_state(), ours.get_state())


def test_a_positions_vector_depends_on_the_seed_and_the_position_alone():
    def noise():
        return RaceNoise(torch.Generator().manual_seed(4), first=10)

    in_order, backwards = noise(), noise()
    wanted = {position: backwards.vector(position, 8) for position in (13, 11, 12, 10)}
    assert all(torch.equal(in_order.vector(position, 8), wanted[position]) for position in (10, 11, 12, 13))
    reference = torch.Generator().manual_seed(4)
    assert torch.equal(in_order.vector(11, 8), torch.empty(2, 8).exponential_(1, generator=reference)[1])
    in_order.forget(12)
    assert set(in_order.vectors) == {12, 13} and torch.equal(in_order.vector(12, 8), wanted[12])
    with pytest.raises(ValueError):
        in_order.vector(11, 8)


@pytest.mark.parametrize("shape", [efficient_tree([3, 2, 2]), full_tree([2, 2, 2]), efficient_tree([1, 1, 1])])
def test_near_zero_temperature_walks_like_greedy(shape):
    """At temperature 0.01 with logit gaps of at least 1, every draw picks the argmax (up to e^-100)."""
    generator, cold = torch.Generator().manual_seed(1), Sampling(temperature=0.01, seed=0)
    for trial in range(40):
        logits = torch.stack([torch.randperm(8, generator=generator).float() for _ in range(1 + shape.size)])
        tops = logits.topk(3).indices.tolist()
        candidates = [tops[1 + node.parent][node.rank % 3] for node in shape.nodes]
        greedy = verify_greedy(shape, candidates, logits.argmax(-1).tolist())
        assert verify_sampling(shape, candidates, logits, cold, per_position(cold.noise(0), shape, 0)) == greedy


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
    assert GREEDY.greedy and GREEDY.generator() is None and GREEDY.noise(0) is None
    assert next_token(logits, GREEDY, None) == 1


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
