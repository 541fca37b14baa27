"""Sampling with the exact AR distribution: the settings and the target distribution. Pure: no model.

AR sampling draws each token from p = softmax(warped logits), warped exactly as transformers'
``generate(do_sample=True)`` warps them: temperature, then top-k, then top-p, by its own
warpers in its order. The tree walk that keeps BiTA's output distributed exactly as p is
``verify_sampling`` (bita/decode/verify.py).

Random numbers come from one ``torch.Generator`` per request, kept on the CPU whatever the
model's device: a pass draws one uniform per child it tries and at most one token, from one
probability row moved to the CPU; and a seed gives the same random stream on every device.
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


def draw(probs: torch.Tensor, generator: torch.Generator) -> int:
    """One token from probs [V], on the generator's device."""
    return int(torch.multinomial(probs.to(generator.device), 1, generator=generator))


def next_token(logits: torch.Tensor, sampling: Sampling, generator: torch.Generator | None) -> int:
    """The token AR decoding emits after a row of logits [V]: the argmax, or a draw from p."""
    if sampling.greedy:
        return int(logits.argmax())
    return draw(target_probs(logits[None], sampling)[0], generator)
