"""Pearson chi-square tests for the sampling tests, without scipy.

Sparse cells are pooled, not dropped: categories whose expected count is below MIN_EXPECTED
go into one "other" cell; if that cell is itself too small it joins the smallest kept one.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Mapping
from dataclasses import dataclass

import torch

MIN_EXPECTED = 5.0


@dataclass(frozen=True)
class ChiSquare:
    statistic: float
    dof: int
    p_value: float
    cells: int  # after pooling

    def __str__(self) -> str:
        if self.cells == 0:
            return "p = 0: categories of probability 0 observed"
        return f"chi2 = {self.statistic:.1f}, dof {self.dof}, p = {self.p_value:.3g} ({self.cells} cells)"


def survival(statistic: float, dof: int) -> float:
    """P(X >= statistic) for X ~ chi-square(dof): the regularised upper incomplete gamma function."""
    return float(torch.special.gammaincc(torch.tensor(dof / 2, dtype=torch.float64),
                                         torch.tensor(statistic / 2, dtype=torch.float64)))


def pooled(weights: Mapping[Hashable, float]) -> list[list[Hashable]]:
    """Group categories so that every group's weight is at least MIN_EXPECTED (where possible)."""
    kept = [[c] for c in sorted(weights, key=lambda c: -weights[c]) if weights[c] >= MIN_EXPECTED]
    rest = [c for c in weights if weights[c] < MIN_EXPECTED]
    if rest and kept and sum(weights[c] for c in rest) < MIN_EXPECTED:
        kept[-1] += rest
    elif rest:
        kept.append(rest)
    return kept


def goodness_of_fit(observed: Counter, expected_probs: Mapping[Hashable, float]) -> ChiSquare:
    """One sample against an exactly known distribution (categories outside it: p = 0, no cells)."""
    n = sum(observed.values())
    if set(observed) - set(expected_probs):
        return ChiSquare(float("inf"), 0, 0.0, 0)
    groups = pooled({c: n * p for c, p in expected_probs.items()})
    statistic = 0.0
    for group in groups:
        expected = n * sum(expected_probs[c] for c in group)
        statistic += (sum(observed[c] for c in group) - expected) ** 2 / expected
    dof = len(groups) - 1
    return ChiSquare(statistic, dof, survival(statistic, dof), len(groups))


def homogeneity(first: Counter, second: Counter) -> ChiSquare:
    """Two samples from one distribution? The 2 x k contingency test, cells pooled on the
    smaller sample's expected counts."""
    n1, n2 = sum(first.values()), sum(second.values())
    smaller = min(n1, n2) / (n1 + n2)
    groups = pooled({c: (first[c] + second[c]) * smaller for c in first | second})
    statistic = 0.0
    for group in groups:
        total = sum(first[c] + second[c] for c in group)
        for sample, n in ((first, n1), (second, n2)):
            expected = total * n / (n1 + n2)
            statistic += (sum(sample[c] for c in group) - expected) ** 2 / expected
    dof = len(groups) - 1
    return ChiSquare(statistic, dof, survival(statistic, dof), len(groups))
