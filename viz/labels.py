"""Short, visible labels of single tokens and drafts for figure ticks, markers and hover text."""

from __future__ import annotations

import html
from collections.abc import Callable

from bita.decode.records import DraftNode
from bita.drafts.sources import BOTH, MASK, NGRAM

Decode = Callable[[list[int]], str]

_VISIBLE = str.maketrans({" ": "␣", "\n": "↵", "\t": "⇥", "\r": "␍"})


def token_label(decode: Decode, token: int, limit: int = 16) -> str:
    """``decode([token])`` with whitespace made visible, cut to ``limit`` characters and
    HTML-escaped (Plotly renders text as pseudo-HTML); '∅' for a token that decodes to nothing."""
    text = decode([token]).translate(_VISIBLE)
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return html.escape(text) if text else "∅"


def draft_origin(node: DraftNode, prob_digits: int = 2, short: bool = False) -> str:
    """Who proposed a draft: 'rank 1, p=0.23' (the mask drafts), 'context n-gram', or both;
    ``short``: 'r1', 'ng', 'r1+ng'."""
    if short:
        mask, ngram, joint = f"r{node.rank}", "ng", "+"
    else:
        mask, ngram, joint = f"rank {node.rank}, p={node.prob:.{prob_digits}f}", "context n-gram", ", and the "
    return {MASK: mask, NGRAM: ngram, BOTH: mask + joint + ngram}[node.source]
