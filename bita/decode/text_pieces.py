"""Each token's piece of a decoded text: what the answer views show token by token, with a tokenizer or from a
saved decoding's texts."""

from __future__ import annotations

from collections.abc import Callable, Sequence

Decode = Callable[[list[int]], str]


def token_texts(tokens: Sequence[int], decode: Decode, window: int = 8) -> list[str]:
    """[len(tokens)] text pieces with ``''.join(pieces) == decode(tokens)`` for decoders whose text
    only grows when tokens are appended (HF tokenizers, in practice). A piece is how much decoding
    a short window ending at the token grows, so leading spaces come out right; a token that ends
    inside a character (decoded as U+FFFD) gets '' and the whole character goes to the next one."""
    pieces: list[str] = []
    done = 0  # tokens[:done] have their text in pieces
    for i in range(len(tokens)):
        start = max(0, done - window)
        before, after = decode(list(tokens[start:done])), decode(list(tokens[start:i + 1]))
        if after.endswith("\ufffd") and i + 1 < len(tokens):
            pieces.append("")
            continue
        pieces.append(after[len(before):] if after.startswith(before) else decode(list(tokens[done:i + 1])))
        done = i + 1
    return pieces
