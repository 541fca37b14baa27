"""Where a corpus index comes from: an adapter's own training answers, or a user's texts; built once
and cached on disk by the content's hash, then memory-mapped.

- A packed self-generated data set (``bita make-data --pack``) or its JSONL: the answers of its
  *train* split only (the held-out answers that calibration scores stay out of the index, so a
  forecast from them is not a leak), less those to questions that copy a benchmark's (LEAKS_FILE).
- A user's JSONL: each line's ``answer_ids``, else its ``text`` (tokenised); a plain text file:
  its paragraphs (blank-line separated), tokenised.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from functools import lru_cache
from pathlib import Path

import numpy as np

from ..drafts.corpus import CorpusIndex
from ..errors import BitaError
from ..package_data import cache_root
from ..model.samples import MANIFEST_FILE, read_samples
from ..package_data import PACKAGE

logger = logging.getLogger(__name__)
LEAKS_FILE = "leaks.json"  # beside a data set: questions that copy benchmark questions (benchmarks/leaks.py)


def corpus_documents(path: Path, tokenizer) -> list[list[int]]:
    """Token lists of the documents at ``path`` (see the module docstring)."""
    if path.is_dir() or (path.suffix == ".jsonl" and _is_self_generated(path)):
        if path.is_dir() and not (path / MANIFEST_FILE).is_file():
            raise BitaError(f"corpus {path} is a folder but not a packed data set (no {MANIFEST_FILE})")
        leaks = path / LEAKS_FILE if path.is_dir() else path.with_name(LEAKS_FILE)
        left_out = set(json.loads(leaks.read_text())["sharegpt_ids"]) if leaks.is_file() else set()
        return [s["answer_ids"] for s in read_samples(path, "train") if s["key"].split(":")[0] not in left_out]
    text = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix == ".jsonl":
        try:
            rows = [json.loads(line) for line in text.splitlines() if line.strip()]
        except json.JSONDecodeError as error:
            raise BitaError(f"corpus {path}: not JSONL ({error})") from None
        texts = [row["text"] for row in rows if isinstance(row, dict) and isinstance(row.get("text"), str)]
        if not texts:
            raise BitaError(f"corpus {path}: no line has a 'text' string (or 'answer_ids')")
    else:
        texts = [block.strip() for block in text.split("\n\n") if block.strip()]
    return [tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]


def _is_self_generated(path: Path) -> bool:
    with path.open(encoding="utf-8") as source:
        first = source.readline()
    try:
        return "answer_ids" in json.loads(first)
    except (json.JSONDecodeError, TypeError):
        return False


def _digest(path: Path, tokenizer) -> str:
    """Hash of the corpus's content (every file of a folder) and the tokenizer's vocabulary size."""
    digest = hashlib.sha256(f"{len(tokenizer)}".encode())
    for file in sorted(path.rglob("*")) if path.is_dir() else [path]:
        if file.is_file():
            digest.update(file.name.encode() + file.read_bytes())
    return digest.hexdigest()[:16]


def existing(path: str) -> Path | None:
    """``path`` as given, else relative to the package (a shipped adapter records its data set as
    ``assets/data/...``), where it exists; None where neither does."""
    return next((p for p in (Path(path).expanduser(), PACKAGE / path) if p.exists()), None)


@lru_cache(maxsize=8)
def load_corpus(path: str, tokenizer) -> CorpusIndex:
    """The index of the corpus at ``path`` (``existing``), built once per content and cached under the
    bita cache as two .npy files (tokens, suffix array), memory-mapped on later loads."""
    source = existing(path)
    if source is None:
        raise BitaError(f"corpus {path!r} not found")
    cached = cache_root() / "corpus" / f"{source.name}-{_digest(source, tokenizer)}"
    if not (cached / "reverse_order.npy").is_file():
        documents = corpus_documents(source, tokenizer)
        if not any(documents):
            raise BitaError(f"corpus {path!r} holds no text")
        logger.info("indexing corpus %s (%s tokens) once into %s", source, f"{sum(map(len, documents)):,}", cached)
        index = CorpusIndex.build(documents)
        cached.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=cached.parent, prefix=".index-"))
        np.save(staging / "tokens.npy", index.tokens)
        np.save(staging / "reverse_order.npy", index.reverse_order)
        try:
            os.replace(staging, cached)
        except OSError:  # a concurrent build won
            pass
    return CorpusIndex(np.load(cached / "tokens.npy", mmap_mode="r"),
                       np.load(cached / "reverse_order.npy", mmap_mode="r"))


def adapter_corpus_path(training: dict) -> str | None:
    """The data an adapter was trained on (its config's ``training['data']``), where it still exists."""
    data = training.get("data")
    return data if data and existing(data) else None
