"""Sampling as AR samples, token for token: the settings, the target distribution and the race noise. Pure: no model.

AR sampling draws each token from p = softmax(warped logits), warped exactly as transformers'
``generate(do_sample=True)`` warps them: temperature, then top-k, then top-p, by its own
warpers in its order, and then ``torch.multinomial(p, 1)``. On the CPU (torch 2.13) that draw is
an exponential race: it computes ``argmax(p / E)`` with ``E = torch.empty_like(p).exponential_(1)``
drawn from the generator, and consumes the generator exactly as that one ``exponential_`` does
(checked for every dtype and vocabulary size we use, docs/sampling.md). So a token is a
deterministic function of p and its vector E; ``RaceNoise`` fixes the vector of each sequence
position (the request's t-th draw for its t-th sampled token), and whoever proposes the token at
a position, AR or any BiTA draft, the token emitted there is ``race_winner(p, E)``: the same one.
The tree walk on race winners is ``verify_sampling`` (bita/decode/verify.py).

Random numbers come from one ``torch.Generator`` per request, kept on the CPU whatever the
model's device, so a seed gives the same vectors on every device.
Repetition penalty is not offered (it would need each tree row's own context).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

import torch
from transformers import LogitsProcessorList, TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

from ..errors import BitaError

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


def warpers(sampling: Sampling) -> LogitsProcessorList:
    """transformers' warpers that ``generate(do_sample=True)`` applies for these settings, in its order."""
    chosen = LogitsProcessorList()
    if sampling.temperature != 1.0:
        chosen.append(TemperatureLogitsWarper(float(sampling.temperature)))
    if sampling.top_k:
        chosen.append(TopKLogitsWarper(sampling.top_k, min_tokens_to_keep=1))
    if sampling.top_p < 1.0:
        chosen.append(TopPLogitsWarper(float(sampling.top_p), min_tokens_to_keep=1))
    return chosen


def target_probs(logits: torch.Tensor, sampling: Sampling) -> torch.Tensor:
    """The distribution AR sampling draws from: logits [N, V] -> float probs [N, V] (rows sum to 1)."""
    scores = logits.float()
    return torch.softmax(warpers(sampling)(scores.new_empty((scores.shape[0], 0), dtype=torch.long), scores), -1)


class RaceNoise:
    """One request's race vectors by sequence position: E_t [V] float32, Exp(1) per token, for the token
    at position t.

    E_t is the (t - first)-th draw ``torch.empty(V).exponential_(1, generator=generator)``, in that
    order whoever asks first: asking for t draws every undrawn position up to t, and a vector stays
    cached (on ``device``) until ``forget`` drops it once its position is emitted. So E_t depends on
    the seed and t alone, not on which rows or passes asked, nor in what order. AR asks for each
    position once, in turn: the same draws ``torch.multinomial`` makes, hence HF's tokens. A BiTA
    pass asks only for the positions its walk reaches (each of them is emitted: an accepted draft or
    the bonus), at most depth + 1 a pass.
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
            drawn = torch.empty(size, dtype=torch.float32).exponential_(1, generator=self.generator)
            self.vectors[self.drawn] = drawn.to(self.device)
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
    return int(torch.argmax(probs / noise))


def next_token(logits: torch.Tensor, sampling: Sampling, noise: RaceNoise | None, position: int = 0) -> int:
    """The token AR decoding emits at sequence ``position`` after a row of logits [V]: the argmax, or
    the race winner of p with that position's vector (greedy: ``noise`` None, ``position`` unused)."""
    if sampling.greedy:
        return int(logits.argmax())
    probs = target_probs(logits[None], sampling)[0]
    return race_winner(probs, noise.vector(position, probs.shape[-1]).to(probs.device))
