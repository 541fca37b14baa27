"""Where the speed comes from: a BiTA step emits tau tokens (accepted drafts + the bonus) at the cost of one
pass of its rows, an AR pass one token at the cost of one row; the expected speedup is their ratio,
tau x (AR pass seconds) / (step seconds). Pure: numbers in, numbers out; the pass costs are the ones
``auto`` measured on this machine (autotree.CostTable, ``python -m bita pass-cost``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..decode.records import StepRecord


def expected_speedup(tau: float, step_seconds: float, ar_seconds: float) -> float:
    """Tokens per second of steps emitting ``tau`` tokens in ``step_seconds`` over AR's, one token in ``ar_seconds``."""
    return tau * ar_seconds / step_seconds


def speedup_grid(taus: Sequence[float], step_seconds: Sequence[float], ar_seconds: float) -> list[list[float]]:
    """[len(step_seconds)][len(taus)] expected speedups: row s, column t at tau ``taus[t]`` and step
    ``step_seconds[s]``."""
    return [[expected_speedup(tau, step, ar_seconds) for tau in taus] for step in step_seconds]


@dataclass(frozen=True)
class AnswerPoint:
    """One answer on the figure: its drafting passes' tau and mean seconds a pass, the speedup these give
    against the measured AR pass (``expected``), and the speedup a race measured (None: no race)."""

    tau: float
    step_seconds: float
    expected: float
    raced: float | None = None


def answer_point(records: Sequence[StepRecord], ar_seconds: float, raced: float | None = None) -> AnswerPoint | None:
    """The point of an answer's tree passes (its prefill, a prompt's worth of rows, left out); None without any."""
    steps = [r for r in records if r.kind == "tree"]
    if not steps:
        return None
    tau = sum(len(r.emitted) for r in steps) / len(steps)
    seconds = sum(r.seconds for r in steps) / len(steps)
    return AnswerPoint(tau, seconds, expected_speedup(tau, seconds, ar_seconds), raced)
