"""Forecasts under sampling: the stored summary of the target's distribution warps like transformers'
warpers, the forecast walk matches a simulation of the sampled walk, and it reduces to the greedy
forecast as the temperature falls. Pure: no model."""

import random

import pytest
import torch
from conftest import RAW_PROBABILITIES

from bita.decode.sampling import Sampling, target_probs
from bita.drafts.dynamic import DynamicShape
from bita.drafts.tree import ROOT, parse_tree_spec
from bita.errors import BitaError
from bita.model.rank_stats import MISS, encode_pass
from bita.model.target_stats import OUTSIDE, TARGET_TOP, TargetDepth, decode_target, encode_target, target_summaries
from bita.plan.dynamic_plan import ScoredPass, forecast_passes
from bita.plan.sampled_forecast import forecast_sampled, sampled_passes, sampling_passes, warped_top

SETTINGS = [Sampling(0.3), Sampling(0.7), Sampling(1.0), Sampling(1.6), Sampling(5.0), Sampling(0.7, top_p=0.9),
            Sampling(1.0, top_k=3), Sampling(1.0, top_p=0.5, top_k=5), Sampling(1.0, top_p=0.999)]


def peaked_logits(rows: int, vocab: int = 300, seed: int = 0) -> torch.Tensor:
    """[rows, vocab]: a few likely tokens over a long tail, like a language model's."""
    generator = torch.Generator().manual_seed(seed)
    logits = torch.randn(rows, vocab, generator=generator) * 1.5
    logits[:, :8] += torch.rand(rows, 8, generator=generator) * 8
    return logits


def stored_depths(logits: torch.Tensor) -> list[TargetDepth]:
    """One pass whose depths have these target rows [D, V], through the stored line format."""
    drafts = torch.arange(6).expand(len(logits), 6)[None]  # the drafts are tokens 0..5
    summary = target_summaries(logits[None], drafts, torch.zeros(1, len(logits), dtype=torch.long))
    line = encode_target(*(summary[key][0].tolist() for key in ("top", "log_mass", "draft_index", "answer_index")),
                         answered=[True] * len(logits), drafted=len(logits))
    return decode_target(line)


@pytest.mark.parametrize("sampling", SETTINGS, ids=lambda s: f"T{s.temperature}-p{s.top_p}-k{s.top_k}")
def test_the_stored_summary_warps_like_transformers(sampling):
    logits = peaked_logits(16)
    exact = target_probs(logits, sampling)  # [16, V]: transformers' warpers
    for row, depth in zip(exact, stored_depths(logits)):
        top = row.sort(descending=True).values[:TARGET_TOP]
        approx = torch.tensor(warped_top(depth, sampling))
        assert approx == pytest.approx(top[:len(approx)], abs=0.02)
        assert len(approx) == TARGET_TOP or float(top[len(approx):].sum()) < 1e-6  # top-k / top-p cut only zeros


def test_a_line_keeps_its_depths_drafts_and_answer():
    depths = stored_depths(peaked_logits(3))
    assert len(depths) == 3 and all(d.top[0] == 0.0 and len(d.top) == TARGET_TOP for d in depths)
    assert all(len(d.drafts) == 6 and OUTSIDE <= min(d.drafts) for d in depths)
    assert decode_target("") == []


def random_pass(rng: random.Random, depths: int = 3) -> tuple[ScoredPass, list[list[float]]]:
    """A pass whose target at each depth of the answer's path is a distribution over 8 tokens (token
    t is the draft of rank t; tokens 6 and 7, the least likely, are drafted by nobody) with the
    answer's token drawn from it,
    and the same pass as stored (a TargetDepth per depth, its probabilities exact at T = 1)."""
    import math

    dists, targets, ranks = [], [], []
    for _ in range(depths):
        weights = [0.05 + rng.random() ** 2 for _ in range(6)]
        weights += [0.05 * rng.random() for _ in range(2)]
        dist = [w / sum(weights) for w in weights]
        order = sorted(range(8), key=lambda t: -dist[t])
        answer = rng.choices(range(8), dist)[0]
        dists.append(dist)
        ranks.append(answer if answer < 6 else MISS)
        top = [math.log(dist[t] / dist[order[0]]) for t in order[:TARGET_TOP]]
        targets.append(TargetDepth(tuple(top), (0.0,) * 2 + (math.log(1 / dist[order[0]]),) + (0.0,) * 3,
                                   tuple(order.index(t) if order.index(t) < TARGET_TOP else OUTSIDE for t in range(6)),
                                   order.index(answer) if order.index(answer) < TARGET_TOP else OUTSIDE))
    probs = [[0.5, 0.2, 0.1, 0.1, 0.05, 0.05]] * depths
    return ScoredPass(tuple(ranks), probs, 0, 0, targets), dists


def simulate(tree, scored: ScoredPass, dists, rng: random.Random) -> tuple[int, bool]:
    """One sampled walk where, as the forecast assumes, only the answer's path has drafts the target
    can choose: (accepted, ends on a node with no mask group)."""
    node, accepted = ROOT, 0
    for depth, dist in enumerate(dists):
        token = rng.choices(range(8), dist)[0]
        child = next((c for c in tree.children[node] if tree.nodes[c].rank == token), None)
        if child is None:
            break
        accepted, node = accepted + 1, child
        if scored.ranks[depth] != token:  # off the answer's path: the target there is unknown, taken as a miss
            break
    return accepted, node != ROOT and not tree.nodes[node].has_group


@pytest.mark.parametrize("spec", ["chain:3", "efficient:3,2,2", "efficient:4,2/chain-groups", "full:2,2,2"])
def test_the_forecast_walk_matches_a_simulated_sampled_walk(spec):
    tree, rng = parse_tree_spec(spec), random.Random(7)
    for _ in range(20):
        scored, dists = random_pass(rng)
        runs = [simulate(tree, scored, dists, rng) for _ in range(4000)]
        guess = forecast_sampled(tree, [scored], Sampling(1.0))
        assert guess.tokens_per_drafted_pass == pytest.approx(1 + sum(a for a, _ in runs) / len(runs), abs=0.05)
        assert guess.draftless_share == pytest.approx(sum(g for _, g in runs) / len(runs), abs=0.03)


def test_as_the_temperature_falls_the_sampled_forecast_becomes_the_greedy_one():
    rng = random.Random(3)
    passes = []
    for _ in range(40):
        scored, dists = random_pass(rng)
        # greedy data: the answer is the target's likeliest token, and the chain is right 0..2 tokens
        greedy_ranks = tuple(max(range(8), key=lambda t: d[t]) for d in dists)
        # (and no near ties with it, which even T = 0.01 would split)
        targets = [TargetDepth((0.0,) + tuple(min(x, -1.0) for x in t.top[1:]), t.log_mass, t.drafts, 0)
                   for t in scored.targets]
        right = rng.randrange(3)
        passes.append(ScoredPass(tuple(r if r < 6 else MISS for r in greedy_ranks), scored.probs, right + 1, right,
                                 targets))
    for tree in (parse_tree_spec("efficient:3,2,2"), DynamicShape(10, 2, 4, 1.0, RAW_PROBABILITIES)):
        greedy = forecast_passes(tree, passes, ngram_tokens=4)
        cold = forecast_sampled(tree, passes, Sampling(0.01), ngram_tokens=4)
        assert cold.tokens_per_pass == pytest.approx(greedy.tokens_per_pass, abs=1e-6)
        assert cold.draftless_share == pytest.approx(greedy.draftless_share, abs=1e-6)
        assert cold.rows == greedy.rows
        hot = forecast_sampled(tree, passes, Sampling(1.0), ngram_tokens=4)
        assert hot.tokens_per_pass < greedy.tokens_per_pass


def test_passes_without_targets_cannot_be_forecast_sampled():
    with pytest.raises(BitaError, match="calibrate"):
        sampled_passes([ScoredPass((0, 0, 0), [[0.9]] * 3, 0, 0)])


def test_sampled_requests_mix_greedy_and_sampled_contexts_by_temperature():
    def lines(first_rank):
        return {"pass_sample": [encode_pass([first_rank, 0, 0], [[900], [900], [900]], [0, 0])] * 10,
                "target_sample": ["0,-100,-200,-300,-400/0,0,0,0,0,0/0,1,2,3,4,5/0"] * 10}

    class Config:
        acceptance = {**lines(0), "sampled_contexts": {"temperature": 1.0, **lines(1)}}

    class Adapter:
        config = Config()

    for temperature, hot in ((0.3, 3), (0.7, 7), (1.0, 10), (1.5, 10)):
        mixed = sampling_passes(Adapter(), Sampling(temperature))
        assert len(mixed) == 10 and sum(p.ranks[0] == 1 for p in mixed) == hot
    del Config.acceptance["sampled_contexts"]
    with pytest.raises(BitaError, match="calibrate"):
        sampling_passes(Adapter(), Sampling(0.7))
