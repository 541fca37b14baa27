"""How a mask group's logits become drafts (bita/decode/mask_drafts.py): greedy the most probable; sampled raced with
the verifier's vectors, so that a mask row equal to the model's drafts first the very token sampling emits, and one
near it drafts that token far more often than its most probable one is."""

import torch

from bita.decode.mask_drafts import RACE_CANDIDATES, draft_choice, raced, raced_vectors
from bita.decode.sampling import GREEDY, RaceNoise, Sampling, largest, race_winner, target_probs
from bita.decode.verify import ahead_of

VOCAB, K = 300, 3


def vectors(seed: int, depth: int = 1, size: int = VOCAB) -> torch.Tensor:
    """[depth, size] a request's race vectors for positions 1.. depth past 0."""
    noise = RaceNoise(torch.Generator().manual_seed(seed), 0)
    return raced_vectors(ahead_of(noise, 0), 0, depth, size)


def test_greedy_drafts_are_the_most_probable_whatever_the_vectors():
    logits = torch.randn(2, VOCAB, generator=torch.Generator().manual_seed(0))
    expected = largest(torch.softmax(logits, -1), K)
    for got in (draft_choice(logits, K), draft_choice(logits, K, GREEDY, vectors(1, depth=2))):
        assert all(torch.equal(a, b) for a, b in zip(got, expected))


def test_raced_with_the_models_own_row_the_first_draft_is_the_token_sampling_emits():
    """q = p and a vocabulary within RACE_CANDIDATES: argmax(q / E) is the race winner of p with E, every time."""
    sampling, generator = Sampling(temperature=0.8, seed=0), torch.Generator().manual_seed(1)
    for seed in range(40):
        logits = 3 * torch.randn(1, RACE_CANDIDATES // 2, generator=generator)
        drawn = vectors(seed, size=logits.shape[-1])
        assert raced(logits, drawn, K, sampling)[0, 0] == race_winner(target_probs(logits, sampling)[0], drawn[0])


def test_raced_drafts_are_accepted_more_often_than_the_most_probable_where_the_mask_is_near_the_model():
    """A mask row that is the model's row plus noise: over 300 positions its raced first draft is the emitted token
    far more often than its most probable token is (here 0.71 against 0.20)."""
    sampling, generator = Sampling(temperature=1.0, top_p=0.95, seed=0), torch.Generator().manual_seed(2)
    raced_hits = likeliest_hits = 0
    for seed in range(300):
        model = 2 * torch.randn(1, VOCAB, generator=generator)
        mask = model + 0.5 * torch.randn(1, VOCAB, generator=generator)
        drawn = vectors(seed)
        emitted = race_winner(target_probs(model, sampling)[0], drawn[0])
        raced_hits += int(draft_choice(mask, K, sampling, drawn)[1][0, 0]) == emitted
        likeliest_hits += int(draft_choice(mask, K)[1][0, 0]) == emitted
    assert raced_hits > 2 * likeliest_hits


def test_raced_drafts_are_distinct_within_the_cut_and_carry_their_softmax_probabilities():
    sampling = Sampling(temperature=0.7, top_k=2, seed=0)
    logits = torch.randn(3, VOCAB, generator=torch.Generator().manual_seed(3))
    probs, tokens = draft_choice(logits, K, sampling, vectors(4, depth=3))
    assert tokens.shape == (3, K) and all(len(set(row)) == K for row in tokens.tolist())
    top_two = largest(logits, 2)[1]
    assert all(set(row[:2]) == set(two) for row, two in zip(tokens.tolist(), top_two.tolist()))  # top-k first
    assert torch.equal(probs, torch.softmax(logits, -1).gather(-1, tokens))


def test_raced_vectors_are_the_positions_after_the_bonus():
    noise = RaceNoise(torch.Generator().manual_seed(5), 10)
    ahead = ahead_of(noise, 12)
    got = raced_vectors(ahead, 2, 3, VOCAB)  # 2 accepted: the bonus at 14, drafts at 15, 16, 17
    assert all(torch.equal(got[d], noise.vector(15 + d, VOCAB)) for d in range(3))
    assert raced_vectors(None, 2, 3, VOCAB) is None
