"""Who drafts: the one set of draft-source names.

A candidate node is proposed by the adapter's mask drafts (MASK), by the context n-gram chain
(NGRAM), by the corpus chain (CORPUS: how the model's own past answers, or a user's texts,
continued the last tokens; corpus.py), or by several of them: their ``joint`` name, e.g. BOTH
(mask+ngram: the masks and the context chain agreed on it). A request drafts with one of the
options of ``DRAFT_OPTIONS``; its option spells the mask source in the plural, ``masks``.
"""

from __future__ import annotations

MASK, NGRAM, CORPUS = "mask", "ngram", "corpus"
SOURCES = (MASK, NGRAM, CORPUS)


def joint(*sources: str) -> str:
    """One name for the sources that proposed a node: e.g. joint(NGRAM, MASK) == 'mask+ngram'."""
    parts = {part for source in sources for part in source.split("+")}
    return "+".join(source for source in SOURCES if source in parts)


def parts(source: str) -> tuple[str, ...]:
    """The single sources of a (joint) source name, in SOURCES order."""
    return tuple(source.split("+"))


BOTH, ALL = joint(MASK, NGRAM), joint(*SOURCES)
DRAFT_OPTIONS = {"masks": MASK, "ngram": NGRAM, "both": BOTH, "all": ALL}  # --drafts value -> source
DEFAULT_DRAFTS = "both"
