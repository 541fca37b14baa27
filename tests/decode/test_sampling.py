"""The warp of sampled decoding (bita/decode/sampling.py) against transformers' own warpers: pure, no model.

``target_probs`` must give bitwise the probabilities that TemperatureLogitsWarper, TopKLogitsWarper and
TopPLogitsWarper give (so our AR loop draws HF's tokens), without sorting the vocabulary on the CPU:
checked on rows of 49,152 tokens (SmolLM2's vocabulary) and of other sizes, peaked, heavy-tailed, flat,
with exact ties and with masked tokens, at temperatures 0.3 to 2, top-p 0.5 to 1 and top-k 0 to 50, and at
top-p values whose threshold transformers' own cumulative probabilities meet to the last bit. The one
allowed difference: where top-p cuts a group of tied scores, transformers keeps whichever of them its
unstable sort puts last, ours the ones with the higher ids (the same count).
"""

import math

import pytest
import torch
from transformers import LogitsProcessorList, TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

from bita.decode.sampling import (CANDIDATES, Sampling, cut_row, cut_sorted, largest, past_ranks, settled_count,
                                  sorted_nucleus, target_probs, top_p_threshold, warped_scores)

pytestmark = pytest.mark.usefixtures("one_thread")

VOCAB = 49_152
TEMPERATURES = (0.3, 0.7, 1.0, 1.5, 2.0)
TOP_PS = (0.5, 0.8, 0.9, 0.95, 0.99, 1.0)
TOP_KS = (0, 1, 5, 50)


def reference_scores(logits: torch.Tensor, sampling: Sampling) -> torch.Tensor:
    """transformers' warpers as ``generate(do_sample=True)`` applies them: logits [N, V] -> scores [N, V]."""
    chosen = LogitsProcessorList()
    if sampling.temperature != 1.0:
        chosen.append(TemperatureLogitsWarper(float(sampling.temperature)))
    if sampling.top_k:
        chosen.append(TopKLogitsWarper(sampling.top_k, min_tokens_to_keep=1))
    if sampling.top_p < 1.0:
        chosen.append(TopPLogitsWarper(float(sampling.top_p), min_tokens_to_keep=1))
    scores = logits.float()
    return chosen(scores.new_empty((scores.shape[0], 0), dtype=torch.long), scores)


def zipf(generator: torch.Generator, size: int = VOCAB, slope: float = 1.2) -> torch.Tensor:
    """[size] logits like a language model's: the token of rank r at -slope * log(r + 1), shuffled, a little noise."""
    ranks = torch.randperm(size, generator=generator).float()
    return -slope * torch.log1p(ranks) + 0.2 * torch.randn(size, generator=generator)


def rows(seed: int, size: int = VOCAB) -> dict[str, torch.Tensor]:
    """Rows [size] of several kinds, by name."""
    generator = torch.Generator().manual_seed(seed)
    peaked = torch.randn(size, generator=generator) * 2
    peaked[torch.randint(size, (1,), generator=generator)] += 14
    masked = zipf(generator, size)
    masked[torch.rand(size, generator=generator) < 0.3] = -float("inf")
    return {"zipf": zipf(generator, size), "steep": zipf(generator, size, 3.0), "peaked": peaked,
            "flat": torch.randn(size, generator=generator) * 0.5, "masked": masked,
            "bf16 ties": zipf(generator, size).bfloat16().float(),
            "few values": torch.randint(0, 6, (size,), generator=generator).float()}


def tie_cut(ours: torch.Tensor, theirs: torch.Tensor, before: torch.Tensor) -> bool:
    """Whether warped rows [V] differ only where top-p cut a tie of ``before`` [V] (the scores top-p saw): the
    same number kept, the ones kept by one alone all tie the smallest kept score, and of the tokens tying it
    ours keeps the higher ids."""
    kept, reference = ours > -float("inf"), theirs > -float("inf")
    boundary = before[kept].min()
    tied = (before == boundary).nonzero()[:, 0]  # in id order
    return bool(kept.sum() == reference.sum() and boundary == before[reference].min()
                and (before[kept != reference] == boundary).all()
                and kept[tied].sort(stable=True).values.equal(kept[tied]))  # removed ones first, then kept


def assert_transformers_warp(logits: torch.Tensor, sampling: Sampling) -> int:
    """Our warp of logits [N, V] is transformers' bitwise, rows where top-p cut a tie aside (``tie_cut``);
    returns how many rows those were."""
    ours, theirs = warped_scores(logits, sampling), reference_scores(logits, sampling)
    before = reference_scores(logits, Sampling(sampling.temperature, top_k=sampling.top_k, seed=0))
    same = torch.tensor([torch.equal(a, b) for a, b in zip(ours, theirs)])
    cut = [tie_cut(*row) for row in zip(ours[~same], theirs[~same], before[~same])]
    assert all(cut), (sampling, (~same).nonzero()[:, 0].tolist())
    assert torch.equal(target_probs(logits, sampling)[same], torch.softmax(theirs[same], -1))
    return len(cut)


@pytest.mark.parametrize("temperature", TEMPERATURES)
def test_the_warp_is_transformers_bitwise(temperature):
    """Every setting on every kind of row; a tie cut by top-p is rare but where ties are many (bf16 logits,
    a few values) or the nucleus is thousands of tokens wide (flat rows, a high temperature)."""
    kinds = rows(int(temperature * 10))
    logits = torch.stack(list(kinds.values()))
    untied = torch.tensor([name not in ("bf16 ties", "few values") for name in kinds])
    cuts = 0
    for top_p in TOP_PS:
        for top_k in TOP_KS:
            sampling = Sampling(temperature, top_p=top_p, top_k=top_k, seed=0)
            cuts += assert_transformers_warp(logits[untied], sampling)
            assert_transformers_warp(logits[~untied], sampling)
    assert cuts <= 0.05 * len(TOP_PS) * len(TOP_KS) * untied.sum()


@pytest.mark.parametrize("size", [5, 100, 1000, 50_257])
def test_other_vocabulary_sizes(size):
    logits = torch.stack([row for name, row in rows(size, size).items() if name not in ("bf16 ties", "few values")])
    for temperature in (0.5, 1.0, 1.7):
        for top_p in (0.5, 0.9, 0.99):
            for top_k in (0, 3):
                assert_transformers_warp(logits, Sampling(temperature, top_p=top_p, top_k=top_k, seed=0))


def test_many_language_model_like_rows():
    generator = torch.Generator().manual_seed(7)
    logits = torch.stack([zipf(generator, slope=1.0 + 2 * torch.rand(1, generator=generator).item())
                          for _ in range(48)])
    for setting in (dict(temperature=0.7, top_p=0.95), dict(temperature=1.0, top_p=0.9),
                    dict(temperature=0.7, top_p=0.8, top_k=50)):
        assert_transformers_warp(logits, Sampling(**setting, seed=0))


def boundary_top_ps(row: torch.Tensor, count: int) -> list[float]:
    """top-p values whose float32 threshold meets, or sits one float32 step from, transformers' own cumulative
    probabilities of ``row`` [V] (at the ``count`` positions below its largest tokens): where an estimate of
    the cumulative sum would decide the wrong side."""
    cumulative = torch.sort(row).values.softmax(-1).cumsum(-1)[-count - 1:-1]
    up, down = (torch.nextafter(cumulative, torch.tensor(bound)) for bound in (1.0, 0.0))
    return [1 - value for value in torch.cat([cumulative, up, down]).double().tolist() if 0 < value < 1]


def test_thresholds_on_transformers_own_cumulative_sums():
    kinds = rows(11)
    for name in ("steep", "peaked", "masked"):
        for temperature in (0.7, 1.0):
            row = kinds[name][None] / temperature
            for top_p in boundary_top_ps(row[0], 12):
                assert top_p_threshold(top_p) == torch.tensor(1 - top_p, dtype=torch.float32).item()
                assert_transformers_warp(row * temperature, Sampling(temperature, top_p=top_p, seed=0))


def past_bounds(row: torch.Tensor, probs: torch.Tensor, total: float, candidates: int) -> tuple[float, float]:
    """The two bounds of sum_r p_r * r / total past the ``candidates`` largest that ``row_nucleus`` uses: V - 1
    times their mass, and ``past_ranks``'."""
    values, indices = largest(row, candidates)
    crude = (row.numel() - 1) * max(1 - math.fsum(probs[indices].tolist()) / total, 0.0)
    return crude, past_ranks(row, probs)(values[-1].item()) / total


def test_the_bounds_of_the_ranks_past_the_candidates_hold():
    for name, row in rows(17).items():
        probs = torch.softmax(row, -1)
        total = probs.sum(dtype=torch.float64).item()
        descending = torch.sort(probs.double(), descending=True).values
        for candidates in CANDIDATES:
            exact = (descending[candidates:] * torch.arange(candidates, VOCAB)).sum().item() / total
            crude, bucketed = past_bounds(row, probs, total, candidates)
            assert exact <= crude * (1 + 1e-9) and exact <= bucketed * (1 + 1e-9), (name, candidates)


def test_a_count_settled_from_the_largest_scores_is_transformers_count():
    """``settled_count`` decides only where rounding cannot move the count; on rows as steep as a language
    model's it decides every ordinary top-p from the largest 64 scores."""
    kinds = rows(13)
    for name in ("steep", "peaked", "masked", "flat", "bf16 ties"):
        row = kinds[name]
        probs = torch.softmax(row, -1)
        total = probs.sum(dtype=torch.float64).item()
        for top_p in [0.5, 0.8, 0.9, 0.95] + boundary_top_ps(row, 6):
            exact = sorted_nucleus(row[None], top_p)[0].item()
            for candidates in CANDIDATES:
                top = probs[largest(row, candidates)[1]].tolist()
                for past in past_bounds(row, probs, total, candidates):
                    kept = settled_count(top, total, top_p_threshold(top_p), VOCAB, past)
                    assert kept in (0, exact), (name, top_p, candidates)
    generator = torch.Generator().manual_seed(13)
    for row in (zipf(generator, slope=3.0) for _ in range(8)):
        probs = torch.softmax(row, -1)
        total = probs.sum(dtype=torch.float64).item()
        top = probs[largest(row, CANDIDATES[0])[1]].tolist()
        for top_p in (0.5, 0.8, 0.9, 0.95):
            crude = past_bounds(row, probs, total, CANDIDATES[0])[0]
            assert settled_count(top, total, top_p_threshold(top_p), VOCAB, crude) > 0


def test_a_tie_cut_by_top_p_keeps_the_higher_ids():
    logits = torch.randn(1, VOCAB, generator=torch.Generator().manual_seed(3)) - 20
    logits[0, [100, 200, 300, 400]] = 5.0  # four tokens of a quarter each: top-p 0.6 keeps three of them
    theirs = reference_scores(logits, Sampling(1.0, top_p=0.6, seed=0))
    assert (theirs > -float("inf")).sum() == 3  # transformers keeps three, whichever its sort puts last
    kept = (warped_scores(logits, Sampling(1.0, top_p=0.6, seed=0))[0] > -float("inf")).nonzero()[:, 0]
    assert kept.tolist() == [200, 300, 400]


def test_the_sorting_path_for_other_devices_cuts_what_the_rows_cut():
    """``cut_sorted`` (what a GPU runs, without reading back) equals ``cut_row`` on every kind of row, ties too."""
    logits = torch.stack(list(rows(5).values()))
    for temperature in (0.7, 1.3):
        for top_p in (0.5, 0.9, 0.99, 1.0):
            for top_k in (0, 5):
                sampling = Sampling(temperature, top_p=top_p, top_k=top_k, seed=0)
                scores = logits / temperature
                assert torch.equal(cut_sorted(scores, sampling), torch.stack([cut_row(row, sampling) for row in scores]))


@pytest.mark.parametrize("count", [1, 5, 64, 512])
def test_largest_gives_topk_values(count):
    kinds = rows(count)
    for name, row in kinds.items():
        values, indices = largest(row, count)
        assert torch.equal(values, torch.topk(row, count).values), name
        assert torch.equal(row[indices], values) and indices.unique().numel() == count, name
    every = torch.stack(list(kinds.values()))  # [kinds, V]: row by row, as a pass's drafts take them
    every[0, 200:200 + count] = 1e3  # the largest in one block or a few
    every[1, -count:] = 1e3  # in the last blocks
    values, indices = largest(every, count)
    assert torch.equal(values, torch.topk(every, count).values) and torch.equal(every.gather(-1, indices), values)
    assert all(row.unique().numel() == count for row in indices)
