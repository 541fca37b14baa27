"""Who drafts: the one set of draft-source names.

A candidate node is proposed by the adapter's mask drafts (MASK), by the context n-gram chain
(NGRAM), or by both (BOTH: the two agreed on it). A request drafts with one of these sources
too; its option spells the mask source in the plural, ``masks`` (``DRAFT_OPTIONS``).
"""

from __future__ import annotations

MASK, NGRAM, BOTH = "mask", "ngram", "both"
DRAFT_OPTIONS = {"masks": MASK, "ngram": NGRAM, "both": BOTH}  # --drafts value -> source
DEFAULT_DRAFTS = "both"
