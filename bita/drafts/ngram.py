"""Context n-gram drafts (prompt lookup): the tokens that followed the last few tokens before.

The history is the prompt plus everything emitted so far, its last token being the next pass's
root. The longest suffix of 3, then 2, then 1 tokens that occurred earlier in the history is
looked up; the tokens after its most recent earlier occurrence are proposed as a chain below
the root. No model is involved, and a proposal costs O(1) dictionary look-ups: the index of
n-gram occurrences grows by ``max_match`` entries per token.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

MAX_MATCH = 3


class NgramIndex:
    """A token history and, for every n-gram (n = 1..max_match) ending before its last token,
    the end of the n-gram's most recent occurrence."""

    def __init__(self, tokens: Iterable[int] = (), max_match: int = MAX_MATCH):
        self.max_match = max_match
        self.tokens: list[int] = []
        self._last_end: dict[tuple[int, ...], int] = {}  # n-gram -> index of its last token
        self.extend(tokens)

    def extend(self, tokens: Iterable[int]) -> None:
        """Append ``tokens``; the n-grams ending at the previous last token become searchable."""
        for token in tokens:
            end = len(self.tokens) - 1
            for n in range(1, min(self.max_match, end + 1) + 1):
                self._last_end[tuple(self.tokens[end + 1 - n:end + 1])] = end
            self.tokens.append(token)

    def propose(self, max_tokens: int) -> list[int]:
        """Up to ``max_tokens`` tokens that followed the most recent earlier occurrence of the
        longest matching suffix (3, 2, then 1 tokens); [] when not even the last token occurred."""
        for n in range(min(self.max_match, len(self.tokens)), 0, -1):
            end = self._last_end.get(tuple(self.tokens[-n:]))
            if end is not None:
                return self.tokens[end + 1:end + 1 + max_tokens]
        return []


def propose(history: Sequence[int], max_tokens: int, max_match: int = MAX_MATCH) -> list[int]:
    """The n-gram chain for a history (prompt + output, root last), without keeping an index."""
    return NgramIndex(history, max_match).propose(max_tokens)
