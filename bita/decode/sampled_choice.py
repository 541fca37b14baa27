"""How a sampled token was drawn, step by step, and how each draft at its position was judged. Pure: from
what a step record's verdicts carry (bita/decode/explain.py, recorded with ``record_verdicts``), no model.

The warp (bita/decode/sampling.py): the raw softmax of the row's logits; the tempered softmax of logits /
temperature; top-k and top-p keep a set of tokens (``Warp.kept`` of them, ``Warp.kept_mass`` of the tempered
mass); the distribution drawn from, p, is the tempered one renormalised over that set. The draw is the
exponential race AR's ``torch.multinomial`` runs: every token x has a draw E(x) ~ Exp(1), fixed by the seed
and the position, and the token with the largest p(x) / E(x) wins. BiTA verifies a draft at that position
by the same race (bita/decode/verify.py): the draft is accepted exactly when it is the winner, that is when
its p / E is the largest of the vocabulary; otherwise it is rejected, whatever its probability. This is not
SpecInfer's rule (accept x with probability min(1, p(x) / q(x)), then sample from the residual): the race
draws the same law, and with the same seed the very tokens AR draws.
"""

from __future__ import annotations

from dataclasses import dataclass

from .explain import Alternative, Warp
from .records import BONUS, StepRecord


@dataclass(frozen=True)
class WarpedToken:
    """One token through the warp: raw softmax, tempered softmax, whether top-k and top-p kept it (p > 0:
    a kept token's p underflows only below e^-87 of the largest), p (what the race draws from), its race draw
    E and its race score p / E (0 where cut: it cannot win)."""

    token: int
    raw_prob: float
    tempered: float
    prob: float
    noise: float

    @property
    def kept(self) -> bool:
        return self.prob > 0

    @property
    def score(self) -> float:
        return self.prob / self.noise


@dataclass(frozen=True)
class JudgedDraft:
    """A draft checked at the row: the token through the warp, and whether it won the race (accepted)."""

    draft: WarpedToken
    accepted: bool


@dataclass(frozen=True)
class SampledChoice:
    """One sampled position explained: the warp's settings and kept set, the row's tokens through the warp
    (its top tokens by raw logit, best first, then the drawn token and the drafts where not among them), the
    drawn token, and the drafts checked there (the accepted one first, where the drawn token was a draft)."""

    warp: Warp
    tokens: tuple[WarpedToken, ...]
    drawn: WarpedToken
    drafts: tuple[JudgedDraft, ...]


def warped(alternative: Alternative) -> WarpedToken:
    return WarpedToken(alternative.token, alternative.raw_prob, alternative.tempered, alternative.prob,
                       alternative.noise)


def sampled_choice(record: StepRecord, slot: int) -> SampledChoice:
    """The sampled choice of token ``slot`` of ``record.emitted``; ValueError where its verdict is not a
    sampled one (greedy, or recorded without ``record_verdicts``)."""
    if not 0 <= slot < len(record.verdicts) or record.verdicts[slot].warp is None:
        raise ValueError(f"token {slot} of pass {record.index} has no sampled verdict")
    verdict = record.verdicts[slot]
    drawn = warped(verdict.chosen)
    was_draft = record.emitted_roles()[slot] != BONUS
    checked = ((JudgedDraft(drawn, True),) if was_draft else ()) + tuple(
        JudgedDraft(warped(a), False) for a in verdict.rejected)
    tokens = list(map(warped, verdict.top))
    for extra in (drawn, *(judged.draft for judged in checked)):
        if all(t.token != extra.token for t in tokens):
            tokens.append(extra)
    return SampledChoice(verdict.warp, tuple(tokens), drawn, checked)
