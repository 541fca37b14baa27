"""Short, visible labels of single tokens for figure ticks, markers and hover text."""

from __future__ import annotations

import html
from collections.abc import Callable

Decode = Callable[[list[int]], str]

_VISIBLE = str.maketrans({" ": "␣", "\n": "↵", "\t": "⇥", "\r": "␍"})


def token_label(decode: Decode, token: int, limit: int = 16) -> str:
    """``decode([token])`` with whitespace made visible, cut to ``limit`` characters and
    HTML-escaped (Plotly renders text as pseudo-HTML); '∅' for a token that decodes to nothing."""
    text = decode([token]).translate(_VISIBLE)
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return html.escape(text) if text else "∅"
