"""The corpus chain's gate: how many of its tokens a pass drafts at each match length, chosen where the
forecast says the rows pay on this machine.

Calibration records, per held-out pass, how far the corpus chain was right and how long its match
was, with the held-out answers kept out of the index (bita/model/rank_stats.py ``corpus``): the chance
that a chain matched m tokens is right to depth d. A gate at threshold t drafts, at match length m,
the depths whose chance is at least t (``chain_lengths``); each candidate gate is forecast together
with the request's mask tree and n-gram chain on the adapter's pass sample and timed by the measured
cost of its rows, and the fastest wins, ``off`` included: where a row costs more than the chain's
tokens are worth, the corpus drafts nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..drafts.corpus import chain_lengths
from ..drafts.dynamic import DynamicShape
from ..drafts.tree import DraftTree
from .acceptance import Forecast
from .autotree import CostTable
from .dynamic_plan import ScoredPass

THRESHOLDS = (0.6, 0.45, 0.3, 0.2, 0.1, 0.0)  # the gates tried; 0: every chain in full
OFF = None


@dataclass(frozen=True)
class CorpusGate:
    """``threshold``: the calibrated chance a drafted chain token needs (OFF: no corpus chain);
    ``lengths`` [match length]: tokens drafted per match length; ``tokens_per_second``: expected, with
    the mask tree and the n-gram chain; ``off_tokens_per_second``: the same without the corpus chain."""

    threshold: float | None
    lengths: tuple[int, ...]
    tokens_per_second: float
    off_tokens_per_second: float

    def describe(self) -> str:
        if self.threshold is OFF:
            return "no corpus chain: its rows would not pay here"
        gate = "every corpus chain in full" if self.threshold == 0 else (
            f"corpus chain tokens whose calibrated chance is at least {self.threshold:g}")
        return (f"{gate} ({self.tokens_per_second:.1f} tok/s expected; without the corpus chain "
                f"{self.off_tokens_per_second:.1f})")


def choose_gate(tree: DraftTree | DynamicShape, ngram_tokens: int, max_tokens: int,
                rates: Sequence[Sequence[float]], passes: list[ScoredPass],
                forecaster: Callable[..., Forecast], costs: CostTable, drafting: bool = False) -> CorpusGate:
    """The fastest gate for corpus chains of up to ``max_tokens`` beside ``tree`` and n-gram chains of
    ``ngram_tokens`` (``rates``: the adapter's calibrated ``corpus`` rates; ``passes`` and ``forecaster``:
    greedy or at the request's sampling); ``drafting``: never OFF (to show the source at work)."""

    def rate(lengths: tuple[int, ...]) -> float:
        guess = forecaster(tree, passes, ngram_tokens, corpus_lengths=lengths)
        return guess.tokens_per_second(costs.seconds(guess.rows), costs.seconds(guess.draftless_rows))

    off = rate(())
    gates = [] if drafting else [CorpusGate(OFF, (), off, off)]  # first: on a tie, fewer rows win
    gates += [CorpusGate(t, lengths, rate(lengths), off)
              for t in THRESHOLDS if any(lengths := chain_lengths(rates, t, max_tokens))]
    return max(gates, key=lambda gate: gate.tokens_per_second)
