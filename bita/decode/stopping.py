"""When to stop, shared by the BiTA and AR loops so both stop at the same token."""

from __future__ import annotations

from collections.abc import Sequence

from ..model.loading import LoadedModel


class StopCondition:
    """Consumes emitted tokens one at a time; reports "eos", "stop" or "length".

    A stop string ends generation at the token that completes it (that token is kept).
    """

    def __init__(self, max_new_tokens: int, eos_token_ids: Sequence[int] = (),
                 stop_strings: Sequence[str] = (), tokenizer=None):
        if stop_strings and tokenizer is None:
            raise ValueError("stop strings need a tokenizer")
        self.max_new_tokens = max_new_tokens
        self.eos_token_ids = set(eos_token_ids)
        self.stop_strings = [s for s in stop_strings if s]
        self.tokenizer = tokenizer
        self.tokens: list[int] = []

    def add(self, token: int) -> str | None:
        """Record one token; return why generation ends with it, or None."""
        self.tokens.append(token)
        if token in self.eos_token_ids:
            return "eos"
        if self.stop_strings:
            tail = self.tokenizer.decode(self.tokens[-64:], skip_special_tokens=False)
            if any(s in tail for s in self.stop_strings):
                return "stop"
        if len(self.tokens) >= self.max_new_tokens:
            return "length"
        return None

    def take(self, tokens: Sequence[int]) -> tuple[list[int], str | None]:
        """Add tokens in order until one ends generation: (tokens kept, finish reason)."""
        kept = []
        for token in tokens:
            kept.append(token)
            finish = self.add(token)
            if finish:
                return kept, finish
        return kept, None


def make_stop(loaded: LoadedModel, max_new_tokens: int, stop_strings: Sequence[str] = ()) -> StopCondition:
    """Stop at EOS, at ``stop_strings`` and at the model's turn stops (a base model's next turn)."""
    return StopCondition(max_new_tokens, loaded.eos_token_ids, tuple(stop_strings) + loaded.turn_stops,
                         loaded.tokenizer)
