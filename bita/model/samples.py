"""The self-generated data set's files: JSONL, one sample per line, or packed into a directory
(token ids as uint16/uint32 in a compressed ``samples.npz`` plus ``manifest.json``; what ships
under ``assets/data``). Written by training (bita/training/data.py), read by training and by the
corpus drafts (bita/plan/corpus_source.py)."""

from __future__ import annotations

import json
import zipfile
from collections import Counter
from pathlib import Path

import numpy as np

from ..errors import BitaError

SAMPLES_FILE, MANIFEST_FILE = "samples.npz", "manifest.json"


def pack_samples(samples: list[dict], directory: Path, manifest: dict) -> Path:
    """Write ``samples`` (with or without ``answer_ids``) compactly: ``samples.npz`` holds
    tokens [sum of lengths] (uint16 when the ids fit), offsets [N+1], prompt_lengths [N] and
    per-sample codes; ``manifest.json`` the code tables, counts and ``manifest``'s fields."""
    directory.mkdir(parents=True, exist_ok=True)
    sequences = [s["prompt_ids"] + s.get("answer_ids", []) for s in samples]
    tokens = np.fromiter((t for seq in sequences for t in seq), dtype=np.int64)
    dtype = np.uint16 if tokens.size == 0 or tokens.max() < 2**16 else np.uint32
    tables = {name: sorted({s.get(name, "") for s in samples}) for name in ("source", "variant", "split", "finish")}
    codes = {name: np.array([values.index(s.get(name, "")) for s in samples], dtype=np.uint8)
             for name, values in tables.items()}
    np.savez_compressed(directory / SAMPLES_FILE, tokens=tokens.astype(dtype),
                        offsets=np.cumsum([0] + [len(seq) for seq in sequences]),
                        prompt_lengths=np.array([len(s["prompt_ids"]) for s in samples], dtype=np.int32),
                        keys=np.array([s["key"] for s in samples]), **codes)
    counts = {name: dict(Counter(s.get(name, "") for s in samples)) for name in ("source", "variant", "split")}
    (directory / MANIFEST_FILE).write_text(json.dumps({
        **manifest, "samples": len(samples), "counts": counts, "codes": tables,
        "answer_tokens": sum(len(s.get("answer_ids", [])) for s in samples),
        "prompt_tokens": sum(len(s["prompt_ids"]) for s in samples)}, indent=1) + "\n")
    return directory


def unpack_samples(directory: Path) -> list[dict]:
    """The samples of a directory written by ``pack_samples``."""
    try:
        tables = json.loads((directory / MANIFEST_FILE).read_text())["codes"]
        with np.load(directory / SAMPLES_FILE) as arrays:
            data = {name: arrays[name] for name in arrays.files}
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as error:
        raise BitaError(f"corrupted packed data in {str(directory)!r}: {error}") from None
    samples = []
    for i, key in enumerate(data["keys"].tolist()):
        sequence = data["tokens"][data["offsets"][i]:data["offsets"][i + 1]].tolist()
        cut = int(data["prompt_lengths"][i])
        codes = {name: values[int(data[name][i])] for name, values in tables.items()}
        sample = {"key": key, **{name: value for name, value in codes.items() if value}, "prompt_ids": sequence[:cut]}
        if codes["finish"]:  # an answered sample
            sample["answer_ids"] = sequence[cut:]
        samples.append(sample)
    return samples


def read_samples(path: Path, split: str | None = None) -> list[dict]:
    """Samples of a packed directory or a JSONL file, optionally of one split only."""
    if path.is_dir() and (path / MANIFEST_FILE).is_file():
        return [s for s in unpack_samples(path) if split is None or s["split"] == split]
    if not path.is_file():
        raise BitaError(f"no training data at {str(path)!r}: run 'python -m bita make-data' first")
    samples = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            sample = json.loads(line)
        except json.JSONDecodeError:
            raise BitaError(f"{str(path)!r} line {number} is not valid JSON") from None
        if split is None or sample.get("split") == split:
            samples.append(sample)
    return samples
