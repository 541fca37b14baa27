"""The one palette of the step-record views: token roles, draft-tree statuses and sources, attention keys."""

from __future__ import annotations

from bita.decode.records import BONUS

BONUS_COLOR = "#ffb55a"
DEPTH_COLORS = ("#8ecae6", "#90d39a", "#c9a6e4", "#f7a6b8", "#9fd8cf", "#e6d47a", "#b8c4f0", "#d9b38c")
REJECTED_COLOR = "#a0a0a0"
ROOT_COLOR = "#4a4a4a"
# Draft-tree markers by who proposed a node (a node several sources proposed: JOINT_SYMBOL), and the
# underline colour of tokens the corpus chain proposed (the n-gram chain's is the text's own).
SOURCE_SYMBOLS = {"mask": "circle", "ngram": "diamond", "corpus": "star"}
JOINT_SYMBOL = "square"
CORPUS_COLOR = "#d9730d"
NEAR_TIE_COLOR = "#d62728"  # the dashed outline of a token chosen at a near tie

# Attention heatmap cells: 0 = blocked, else 1 + the index of the key column's kind here.
KEY_KINDS = ("prompt", "cached", "context", "root", "candidate", "mask")
ATTENTION_COLORS = ("#f4f4f4", "#b279a2", "#9c9c9c", "#4c78a8", "#f58518", "#54a24b", "#e45756")


def depth_color(depth: int) -> str:
    """Colour of accepted drafts at ``depth`` (1-based); cycles past the palette's length."""
    return DEPTH_COLORS[(depth - 1) % len(DEPTH_COLORS)]


def role_color(role: str) -> str:
    """Colour of a token role: BONUS or ``accepted_role(d)`` (bita/decode/records.py)."""
    return BONUS_COLOR if role == BONUS else depth_color(int(role.rsplit("-", 1)[1]))


def source_symbol(source: str) -> str:
    """Marker of a draft proposed by ``source`` (a single or joint source name, bita/drafts/sources.py)."""
    return SOURCE_SYMBOLS.get(source, JOINT_SYMBOL)
