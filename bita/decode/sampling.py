"""Sampling as AR samples, token for token: the settings, the target distribution and the race noise. Pure: no model.

AR sampling draws each token from p = softmax(warped logits), warped exactly as transformers'
``generate(do_sample=True)`` warps them: temperature, then top-k, then top-p, by its warpers'
formulas in its order (on the CPU without sorting the vocabulary: ``warped_scores``; bitwise
theirs but where top-p cuts a tie, ``keep_nucleus``), and then ``torch.multinomial(p, 1)``. On
the CPU (torch 2.13) that draw is an exponential race: it computes ``argmax(p / E)`` with
``E = torch.empty_like(p).exponential_(1)`` drawn from the generator, and consumes the generator
exactly as that one ``exponential_`` does (checked for every dtype and vocabulary size we use,
docs/sampling.md). So a token is a deterministic function of p and its vector E; ``RaceNoise``
fixes the vector of each sequence position (the request's t-th draw for its t-th sampled token),
and whoever proposes the token at a position, AR or any BiTA draft, the token emitted there is
``race_winner(p, E)``: the same one. The tree walk on race winners is ``verify_sampling`` (bita/decode/verify.py).

Random numbers come from one ``torch.Generator`` per request, kept on the CPU whatever the
model's device, so a seed gives the same vectors on every device.
Repetition penalty is not offered (it would need each tree row's own context).
"""

from __future__ import annotations

import math
import secrets
from bisect import bisect_left
from collections.abc import Callable
from dataclasses import dataclass
from itertools import accumulate
from operator import mul

import numpy as np
import torch

from ..errors import BitaError
from ..runtime.device import first_argmax, to_device
from .race_draw import exponentials

MIN_TEMPERATURE, MAX_TEMPERATURE = 0.01, 10.0
MAX_SEED = 2**63 - 1
DRAWN_SEEDS = 2**31  # a seed drawn for the user is short enough to retype


@dataclass(frozen=True)
class Sampling:
    """How to choose each token: greedy (temperature 0, the default) or sampled.

    temperature: 0 (greedy) or MIN_TEMPERATURE..MAX_TEMPERATURE; top_p in (0, 1] (1: off);
    top_k >= 0 (0: off); seed: of the request's generator. Sampling without a seed draws one
    at construction and keeps it, so every run can report the seed that reproduces it (and a
    Sampling reused for several requests repeats that seed: make one per request for fresh
    draws). Invalid settings raise BitaError.
    """

    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int | None = None

    def __post_init__(self):
        number = (int, float)
        if (not isinstance(self.temperature, number) or isinstance(self.temperature, bool)
                or not (self.temperature == 0 or MIN_TEMPERATURE <= self.temperature <= MAX_TEMPERATURE)):
            raise BitaError(f"temperature must be 0 (greedy) or a number from {MIN_TEMPERATURE} to "
                            f"{MAX_TEMPERATURE}, not {self.temperature!r}")
        if not isinstance(self.top_p, number) or isinstance(self.top_p, bool) or not 0 < self.top_p <= 1:
            raise BitaError(f"top_p must be a number in (0, 1] (1: off), not {self.top_p!r}")
        if not isinstance(self.top_k, int) or isinstance(self.top_k, bool) or self.top_k < 0:
            raise BitaError(f"top_k must be an integer >= 0 (0: off), not {self.top_k!r}")
        if self.seed is not None and (not isinstance(self.seed, int) or isinstance(self.seed, bool)
                                      or not 0 <= self.seed <= MAX_SEED):
            raise BitaError(f"seed must be an integer from 0 to {MAX_SEED}, not {self.seed!r}")
        if self.seed is None and not self.greedy:
            object.__setattr__(self, "seed", secrets.randbelow(DRAWN_SEEDS))

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    def generator(self) -> torch.Generator | None:
        """A fresh CPU generator seeded with ``seed``: one per request (None when greedy)."""
        return None if self.greedy else torch.Generator().manual_seed(self.seed)

    def noise(self, first: int, device: torch.device | str = "cpu") -> RaceNoise | None:
        """The race noise of a request whose first sampled token is at sequence position ``first``,
        drawn from a fresh ``generator()`` (None when greedy)."""
        return None if self.greedy else RaceNoise(self.generator(), first, device)

    def describe(self) -> str:
        """e.g. 'greedy' or 'temperature 0.7, top-p 0.9, top-k off, seed 0'."""
        if self.greedy:
            return "greedy"
        return (f"temperature {self.temperature:g}, top-p {self.top_p:g}, "
                f"top-k {self.top_k or 'off'}, seed {self.seed}")


GREEDY = Sampling()


ROUNDING = 2.0 ** -24  # float32's unit roundoff: one rounding moves a value by at most this fraction of it
# The sorted softmax's sum: its reduction tree's levels, and roundings besides the sum (the reciprocal, each
# product, the cast of the cumulative sum, exp's last bit), in units of ROUNDING: generous.
SUM_SLACK = 64
CANDIDATES = (64, 512, 4096)  # how many of the largest scores ``row_nucleus`` tries before it sorts them all
BLOCK = 64  # ``largest`` looks for the largest scores in the blocks of this many tokens with the largest maxima
BUCKET, BUCKETS = 0.25, 4096  # ``past_ranks``' buckets of scores under the largest: their width and number


def top_p_threshold(top_p: float) -> float:
    """What TopPLogitsWarper compares its float32 cumulative probabilities with: ``1 - top_p`` in float32 (a
    Python number meets a float32 tensor in float32)."""
    return float(np.float32(1 - top_p))


def sorted_nucleus(scores: torch.Tensor, top_p: float) -> tuple[torch.Tensor, torch.Tensor]:
    """TopPLogitsWarper's own count, by its own operations: scores [N, V] float32 -> (kept [N] long, how
    many tokens it keeps; boundary [N, 1], the smallest kept score). It sorts ascending, softmaxes, sums
    up (cumsum) and removes the tokens whose cumulative probability is at most ``1 - top_p``, never the
    largest. The sorted values are unique whatever the sort does with ties, so the count is too."""
    ascending = torch.sort(scores).values
    removed = ascending.softmax(-1).cumsum(-1) <= (1 - top_p)
    removed[..., -1] = False
    kept = scores.shape[-1] - removed.sum(-1)
    return kept, ascending.gather(-1, (scores.shape[-1] - kept)[:, None])


def settled_count(top: list[float], total: float, threshold: float, size: int, past: float) -> int:
    """``sorted_nucleus``'s count for one row from its largest probs alone, where rounding cannot change it, else
    0: top [C] the probs (``torch.softmax(scores, -1)``) of its C largest scores, largest first; total their
    float64 sum over the row's ``size`` tokens; threshold ``top_p_threshold``; past a bound of sum_r p_r * r /
    total over the ranks r past the C (rank 0: the largest score; ``past_ranks``).

    Transformers' cumulative probability at descending rank r (the mass of rank r and below, in its
    sorted softmax) is c = (mass below) / (whole mass) of the same exp values; we have s, that ratio from
    our unsorted probs (their normalisation cancels: 2 roundings). c differs from s by the roundings of
    its own softmax: its sum, over ascending values, adds a token into at most one partial sum per larger
    token plus a reduction tree's levels, so its relative error is at most ROUNDING times (SUM_SLACK +
    sum_r p_r * r / total), counted exactly over the C ranks and by ``past`` beyond; then a reciprocal, a
    product and the cast of the float64 cumsum. Where the first removed rank's c is surely <= threshold
    and the last kept rank's surely above, the count is exact.
    """
    shares = [(total - mass) / total for mass in accumulate(top)]  # [C]: s at rank + 1, nonincreasing
    spread = 1.1 * ROUNDING * (SUM_SLACK + sum(map(mul, range(len(top)), top)) / total + past)  # relative
    slack = 4 * (size + 1) * 2.0 ** -53  # float64 sums of up to V terms, absolute
    inside = bisect_left(shares, True, key=lambda share: share <= threshold)  # ranks 1..inside seem kept
    if inside == len(shares) or shares[inside] * (1 + spread) + slack > threshold:
        return 0
    return inside + 1 if inside == 0 or shares[inside - 1] * (1 - spread) - slack > threshold else 0


def past_ranks(row: torch.Tensor, probs: torch.Tensor) -> Callable[[float], float]:
    """For row [V] and its probs [V] (finite), a function bounding sum_j p_j * rank_j over the tokens j scoring
    at most a given score (rank: how many tokens score above): in buckets of BUCKET under the largest score
    (the last takes the rest), a token's rank is below the count of its bucket and those above it. Tighter
    than V - 1 times their mass where the vocabulary is large (Gemma 3's 262,144) or the tail heavy."""
    largest_score = row.max().item()
    bucket = ((largest_score - row) / BUCKET).clamp(max=BUCKETS - 1).long()
    weights = (torch.bincount(bucket, weights=probs.double(), minlength=BUCKETS)
               * torch.bincount(bucket, minlength=BUCKETS).cumsum(0))
    from_bucket = weights.flip(0).cumsum(0).flip(0).tolist()  # [BUCKETS]: over that bucket and those below
    # the bucket of ``score``, one lower: float32's rounding of largest - score may put the score's own lower
    return lambda score: from_bucket[max(int(min((largest_score - score) / BUCKET, BUCKETS - 1)) - 1, 0)]


def keep_nucleus(scores: torch.Tensor, kept: torch.Tensor, boundary: torch.Tensor) -> torch.Tensor:
    """scores [N, V] with -inf past each row's ``kept`` [N] largest, whose smallest is ``boundary`` [N, 1].

    Tokens whose score ties the boundary are kept or removed together, but where the count ends inside
    such a tie: then the ones with the higher ids are kept, as TopPLogitsWarper's ascending sort would keep
    them were it stable. ``torch.sort`` is not (stable=False: on the CPU it orders ties by the whole row), so
    there transformers keeps some subset of the tie: the one case where this warp and its warper differ.
    """
    removed = scores < boundary
    excess = scores.shape[-1] - removed.sum(-1, keepdim=True) - kept[:, None]  # [N, 1] tied tokens past the count
    tied = scores == boundary
    return scores.masked_fill(removed | (tied & (tied.cumsum(-1) <= excess)), -float("inf"))


def at_least(row: torch.Tensor, value: float) -> torch.Tensor:
    """row [V] float32 with -inf below ``value`` (a float32 number), in one pass: kept is what exceeds the float32
    just below it."""
    below = float(np.nextafter(np.float32(value), np.float32(-np.inf)))  # no torch operation: a scalar's work
    return torch.nn.functional.threshold(row, below, -float("inf"))


def largest(scores: torch.Tensor, count: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``torch.topk(scores, count)`` over the last dimension of scores [..., V]: the same values [..., count], largest
    first, and tokens [..., count] holding them (among ties, maybe others). Where V is a multiple of BLOCK and count
    blocks are at most a quarter of it, from those blocks with the largest maxima: every score among the count
    largest lies in one of them (or ties one there), and scanning block maxima is a fraction of topk's cost over V."""
    size = scores.shape[-1]
    if size % BLOCK or 4 * count * BLOCK > size:
        return torch.topk(scores, count)
    blocks = scores.unflatten(-1, (size // BLOCK, BLOCK))  # [..., V / BLOCK, BLOCK]
    chosen = torch.topk(blocks.amax(-1), count).indices  # [..., count]
    inside = torch.gather(blocks, -2, chosen[..., None].expand(*chosen.shape, BLOCK)).flatten(-2)  # [..., count x B]
    values, inner = torch.topk(inside, count)
    return values, torch.gather(chosen, -1, inner // BLOCK) * BLOCK + inner % BLOCK


def cut_ties(row: torch.Tensor, kept: int, boundary: float, above: int) -> torch.Tensor:
    """row [V] float32 with -inf past its ``kept`` largest scores, whose smallest is ``boundary`` and ``above`` of
    which exceed it: of the tokens tying the boundary, the ones with the higher ids are kept (as ``keep_nucleus``)."""
    ties = (row == boundary).nonzero()[:, 0]
    return at_least(row, boundary).index_fill_(0, ties[:ties.numel() - (kept - above)], -float("inf"))


def row_nucleus(row: torch.Tensor, top_p: float) -> torch.Tensor:
    """row [V] float32 on the CPU with -inf past TopPLogitsWarper's nucleus (its count bitwise, ties as
    ``keep_nucleus`` keeps them): the count from the largest 64, then 512 and 4096 scores (``settled_count``,
    with ``past_ranks``' bound where V - 1 a token is not enough), sorting the row only where that leaves it undecided (flat
    distributions at a high top-p, a cumulative probability within rounding of the threshold, NaN scores)."""
    size, probs = row.numel(), torch.softmax(row, -1)
    total, threshold = probs.sum(dtype=torch.float64).item(), top_p_threshold(top_p)
    kept, bound = 0, None
    for candidates in CANDIDATES if math.isfinite(total) else ():
        values, indices = largest(row, min(candidates, size))
        top, values = probs[indices].tolist(), values.tolist()
        past = (size - 1) * max(1 - math.fsum(top) / total, 0.0)
        kept = settled_count(top, total, threshold, size, past)
        if not kept and candidates < size:  # again with a tighter bound of the ranks past the candidates
            bound = bound or past_ranks(row, probs)
            kept = settled_count(top, total, threshold, size, min(past, bound(values[-1]) / total))
        if kept or candidates >= size:
            break
    if not kept:
        kept, boundary = (value.item() for value in sorted_nucleus(row[None], top_p))
        return cut_ties(row, kept, boundary, int((row > boundary).sum()))
    boundary = values[kept - 1]
    if kept < len(values) and values[kept] < boundary:  # no tie is cut: keep what reaches the boundary
        return at_least(row, boundary)
    return cut_ties(row, kept, boundary, values.index(boundary))  # the scores above the boundary come first


def cut_row(row: torch.Tensor, sampling: Sampling) -> torch.Tensor:
    """One row [V] float32 on the CPU after top-k and top-p, each from a partial selection and one pass."""
    if sampling.top_k:
        row = at_least(row, largest(row, min(sampling.top_k, row.numel()))[0][-1].item())
    return row_nucleus(row, float(sampling.top_p)) if sampling.top_p < 1.0 else row


def cut_sorted(scores: torch.Tensor, sampling: Sampling) -> torch.Tensor:
    """scores [N, V] float32 after top-k and top-p on any device, by transformers' operations (top-p's sort
    included) with nothing read back to the host: what ``cut_row`` gives row by row."""
    if sampling.top_k:
        kth = torch.topk(scores, min(sampling.top_k, scores.shape[-1]))[0][..., -1, None]
        scores = scores.masked_fill(scores < kth, -float("inf"))
    if sampling.top_p < 1.0:
        scores = keep_nucleus(scores, *sorted_nucleus(scores, float(sampling.top_p)))
    return scores


def warped_scores(logits: torch.Tensor, sampling: Sampling) -> torch.Tensor:
    """logits [N, V] -> float32 scores [N, V] warped as ``generate(do_sample=True)`` warps them, in its order:
    temperature, top-k (every token tying the k-th is kept) and top-p, by the formulas of transformers'
    TemperatureLogitsWarper, TopKLogitsWarper and TopPLogitsWarper. On the CPU row by row without sorting
    the vocabulary (``cut_row``); elsewhere by the sort (``cut_sorted``: no sync with the device)."""
    scores = logits.float()
    if sampling.temperature != 1.0:
        scores = scores / float(sampling.temperature)
    if scores.device.type == "cpu" and (sampling.top_k or sampling.top_p < 1.0):
        rows = [cut_row(row, sampling) for row in scores]  # AR and the walk warp one row at a time: no copy then
        return rows[0][None] if len(rows) == 1 else torch.stack(rows)
    return cut_sorted(scores, sampling)


def target_probs(logits: torch.Tensor, sampling: Sampling) -> torch.Tensor:
    """The distribution AR sampling draws from: logits [N, V] -> float32 probs [N, V] (rows sum to 1),
    bitwise what transformers' warpers give (``warped_scores``) but for a tie cut by top-p (``keep_nucleus``)."""
    return torch.softmax(warped_scores(logits, sampling), -1)


class RaceNoise:
    """One request's race vectors by sequence position: E_t [V] float32, Exp(1) per token, for the token
    at position t.

    E_t is the (t - first)-th draw ``torch.empty(V).exponential_(1, generator=generator)``, in that
    order whoever asks first: asking for t draws every undrawn position up to t, and a vector stays
    cached (on ``device``) until ``forget`` drops it once its position is emitted. So E_t depends on
    the seed and t alone, not on which rows or passes asked, nor in what order. AR asks for each
    position once, in turn: the same draws ``torch.multinomial`` makes, hence HF's tokens. A BiTA
    pass's walk asks only for the positions it reaches (each of them is emitted: an accepted draft or
    the bonus), at most depth + 1 a pass; its raced drafts (mask_drafts.py) ask for the next positions'
    a pass early.
    """

    def __init__(self, generator: torch.Generator, first: int, device: torch.device | str = "cpu"):
        self.generator, self.first, self.device = generator, first, torch.device(device)
        self.vectors: dict[int, torch.Tensor] = {}  # position -> E [V], drawn and not yet forgotten
        self.drawn = first  # the next position to draw
        self.forgotten = first  # positions before this one were emitted and are gone

    def vector(self, position: int, size: int) -> torch.Tensor:
        """E [size] of ``position`` (the vocabulary's ``size``: p's last dimension), drawn if need be."""
        if position < self.forgotten:
            raise ValueError(f"position {position} was emitted and its vector forgotten")
        while self.drawn <= position:
            drawn = exponentials(self.generator, size)  # bitwise that draw, in less time (race_draw.py)
            self.vectors[self.drawn] = to_device(drawn, self.device)  # no wait for a pass queued there
            self.drawn += 1
        vector = self.vectors[position]
        if vector.shape[0] != size:
            raise ValueError(f"position {position} was drawn over {vector.shape[0]} tokens, not {size}")
        return vector

    def forget(self, before: int) -> None:
        """Positions before ``before`` are emitted: drop their vectors."""
        for position in range(self.forgotten, min(before, self.drawn)):
            del self.vectors[position]
        self.forgotten = max(self.forgotten, before)


def race_winner(probs: torch.Tensor, noise: torch.Tensor) -> int:
    """argmax(probs / noise) for probs [V] float32 and noise [V] on one device: with ``noise`` the
    vector ``torch.multinomial(probs, 1)`` would draw, the token it returns (ties: the first)."""
    return first_argmax(probs / noise)


def next_token(logits: torch.Tensor, sampling: Sampling, noise: RaceNoise | None, position: int = 0) -> int:
    """The token AR decoding emits at sequence ``position`` after a row of logits [V]: the argmax, or
    the race winner of p with that position's vector (greedy: ``noise`` None, ``position`` unused)."""
    if sampling.greedy:
        return first_argmax(logits)
    probs = target_probs(logits[None], sampling)[0]
    return race_winner(probs, noise.vector(position, probs.shape[-1]).to(probs.device))
