"""Short, visible labels of single tokens and drafts for figure ticks, markers and hover text."""

from __future__ import annotations

import html
from collections.abc import Callable

from bita.decode.records import DraftNode
from bita.drafts.sources import CORPUS, MASK, NGRAM, parts

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
    """Who proposed a draft: 'rank 1, p=0.23' (the mask drafts), 'context n-gram', 'corpus', or
    several joined ('rank 1, p=0.23, and the context n-gram'); ``short``: 'r1', 'ng', 'co', 'r1+ng'."""
    if short:
        names, joiner = {MASK: f"r{node.rank}", NGRAM: "ng", CORPUS: "co"}, "+"
    else:
        names = {MASK: f"rank {node.rank}, p={node.prob:.{prob_digits}f}", NGRAM: "context n-gram",
                 CORPUS: "past answers (corpus)"}
        joiner = ", and the "
    return joiner.join(names[part] for part in parts(node.source))
