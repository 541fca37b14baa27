"""Corpus drafts: how the model's own past answers (or a user's texts) continued the last tokens.

A suffix array over the *reversed* corpus makes the longest-suffix match incremental: the
history's last token, then the one before it, ... is a prefix that grows one token at a time, so
each added token narrows the array range of matching suffixes by two binary searches. The match
stops at ``max_match`` tokens or where nothing matches; a match shorter than ``min_match`` proposes
nothing. The chain then follows the occurrences forward in the original corpus, at each depth the
token most of the (up to ``max_occurrences``) occurrences still on the chain continue with (those
whose document ends there drop out).

Documents are separated by SEPARATOR (-1), which matches no token, so neither a match nor a chain
crosses from one document into another. The array only needs suffixes ordered by their first
``2 * max_match`` tokens (prefix doubling stops there): longer ties never decide a look-up.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

SEPARATOR = -1
MAX_MATCH, MIN_MATCH, MAX_OCCURRENCES = 16, 2, 64


def corpus_tokens(documents: Sequence[Sequence[int]]) -> np.ndarray:
    """Documents [each a token list] -> one int32 array with SEPARATOR after each document."""
    lengths = [len(d) + 1 for d in documents]
    tokens = np.full(sum(lengths), SEPARATOR, dtype=np.int32)
    starts = np.cumsum([0] + lengths[:-1])
    for start, document in zip(starts, documents):
        tokens[start:start + len(document)] = document
    return tokens


def suffix_array(tokens: np.ndarray, depth: int) -> np.ndarray:
    """int32 [n] start indices of the suffixes of ``tokens`` [n], ordered by their first ``depth``
    tokens or more (prefix doubling until ranks are distinct or the compared width reaches ``depth``);
    SEPARATOR and the end sort before every token."""
    n = len(tokens)
    order = np.argsort(tokens, kind="stable")
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.concatenate([[0], np.cumsum(np.diff(tokens[order]) != 0)])
    width = 1
    while width < depth and rank.max() < n - 1:
        following = np.full(n, -1, dtype=np.int64)
        following[:n - width] = rank[width:]
        order = np.lexsort((following, rank))
        keys = np.stack([rank[order], following[order]])
        rank[order] = np.concatenate([[0], np.cumsum(np.any(np.diff(keys, axis=1) != 0, axis=0))])
        width *= 2
    return order.astype(np.int32)


@dataclass
class CorpusIndex:
    """``tokens`` [n] int32 (documents separated by SEPARATOR) and ``reverse_order`` [n] int32, the
    suffix array of ``tokens[::-1]``."""

    tokens: np.ndarray
    reverse_order: np.ndarray
    max_match: int = MAX_MATCH
    min_match: int = MIN_MATCH
    max_occurrences: int = MAX_OCCURRENCES

    @classmethod
    def build(cls, documents: Sequence[Sequence[int]], max_match: int = MAX_MATCH) -> CorpusIndex:
        tokens = corpus_tokens(documents)
        return cls(tokens, suffix_array(tokens[::-1].copy(), 2 * max_match), max_match)

    def _narrow(self, low: int, high: int, offset: int, token: int) -> tuple[int, int]:
        """Within suffix-array range [low, high) of suffixes sharing ``offset`` first tokens, the
        range whose token at ``offset`` is ``token``."""
        reverse, order, n = self.tokens[::-1], self.reverse_order, len(self.tokens)

        def at(i: int) -> int:
            position = int(order[i]) + offset
            return int(reverse[position]) if position < n else SEPARATOR - 1

        lo, hi = low, high
        while lo < hi:  # first with token >= target
            mid = (lo + hi) // 2
            if at(mid) < token:
                lo = mid + 1
            else:
                hi = mid
        start, hi = lo, high
        while lo < hi:  # first with token > target
            mid = (lo + hi) // 2
            if at(mid) <= token:
                lo = mid + 1
            else:
                hi = mid
        return start, lo

    def longest_match(self, history: Sequence[int]) -> tuple[int, int, int]:
        """(match length m, low, high): the longest suffix of ``history`` (at most ``max_match``
        tokens) found in the corpus, and the reversed suffix-array range of its occurrences."""
        low, high, length = 0, len(self.tokens), 0
        for token in reversed(history[-self.max_match:]):
            narrowed = self._narrow(low, high, length, int(token))
            if narrowed[0] == narrowed[1]:
                break
            (low, high), length = narrowed, length + 1
        return length, low, high

    def propose(self, history: Sequence[int], max_tokens: int | Sequence[int]) -> tuple[list[int], int]:
        """The chain that the occurrences of the longest matching suffix of ``history`` continue with,
        and that match's length m (its confidence); ([], m) when m is shorter than ``min_match``.
        ``max_tokens``: the chain's longest, or per match length (``max_tokens[m]``: a gate, e.g.
        ``chain_lengths``' tokens worth drafting at each confidence)."""
        length, low, high = self.longest_match(history)
        if not isinstance(max_tokens, int):
            max_tokens = gated_tokens(max_tokens, length)
        if length < self.min_match or max_tokens < 1:
            return [], length
        n = len(self.tokens)
        ends = np.asarray(self.reverse_order[low:min(high, low + self.max_occurrences)], dtype=np.int64)
        starts = n - ends  # where each occurrence's continuation begins in the original corpus
        window = np.arange(max_tokens)
        columns = np.minimum(starts[:, None] + window, n - 1)
        following = np.where(starts[:, None] + window < n, self.tokens[columns], SEPARATOR)
        chain: list[int] = []
        alive = np.ones(len(starts), dtype=bool)
        for depth in range(max_tokens):
            alive &= following[:, depth] != SEPARATOR  # an occurrence whose document ended drops out
            if not alive.any():
                break
            values, counts = np.unique(following[alive, depth], return_counts=True)
            best = int(values[np.argmax(counts)])
            chain.append(best)
            alive &= following[:, depth] == best
        return chain, length


def gated_tokens(lengths: Sequence[int], match: int) -> int:
    """A gate's chain tokens (``lengths`` [match length], ``chain_lengths``) for a match of ``match``
    tokens; a match longer than the gate's table takes its last."""
    return lengths[min(match, len(lengths) - 1)]


def chain_lengths(rates: Sequence[Sequence[float]], threshold: float, max_tokens: int) -> tuple[int, ...]:
    """The gate on the corpus chain: per match length m, how many of its tokens to draft, the depths d
    (up to ``max_tokens``) whose calibrated chance ``rates[m][d - 1]`` of being right so far is at
    least ``threshold``; a match longer than the table's takes the longest's."""
    return tuple(next((d for d, rate in enumerate(row[:max_tokens]) if rate < threshold), min(len(row), max_tokens))
                 for row in rates)
