"""Measurements cached in JSON files under ``~/.cache/bita`` (kernel plans, precision probes, pass costs):
one way to read, check and write them.

A table maps a key (what the measurement depends on: the machine, torch, the model's shapes, the
runtime; never a timing, never prose) to what was measured. ``measured`` returns the stored entry, or
measures it once and stores it, and says so in one line (logging) whenever it measures: no entry
yet, an entry it cannot read (a corrupt file, a format from another version), or an entry that a
quick probe finds wrong now (timed while the machine was busy). A probe runs once per process and key.
Files are written whole and renamed, so concurrent processes never read a half-written file.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

Value = TypeVar("Value")
MIN_GAIN = 0.05  # a measured alternative replaces the default (stock kernels, float32) only when this much faster
logger = logging.getLogger(__name__)
_checked: set[tuple[str, str]] = set()  # (file, key) pairs whose entry this process has checked or measured


def read_table(path: Path | None) -> dict:
    """The table in ``path``: {} where there is no file, or it is not a JSON object (corrupt)."""
    if path is None or not path.is_file():
        return {}
    try:
        table = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return table if isinstance(table, dict) else {}


def write_table(path: Path, table: dict) -> None:
    """Write ``table`` as JSON to ``path`` atomically (a file of this process, then renamed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(f".{os.getpid()}.tmp")
    temporary.write_text(json.dumps(table, indent=1))
    temporary.replace(path)


def measured(path: Path | None, key: str, what: str, measure: Callable[[], dict],
             parse: Callable[[dict], Value] = lambda entry: entry,
             check: Callable[[Value], str | None] | None = None) -> Value:
    """``parse`` of the entry ``key`` of the JSON table ``path``, or of ``measure()`` (a JSON-able dict),
    stored there, where there is no readable entry or ``check`` (once per process and key) says what it
    found wrong with it. ``what`` names the measurement in the line that says it is measured. ``path``
    None: measured every time, kept nowhere (tests)."""
    marker = (str(path), key)
    stored = read_table(path).get(key)
    if stored is None:
        if path is not None:
            logger.info("no cached %s for this machine in %s: measuring it once", what, path)
    else:
        try:
            value = parse(stored)
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            logger.warning("the cached %s in %s is unreadable (%s: %s): measuring it again", what, path,
                           type(error).__name__, error)
        else:
            if check is None or marker in _checked:
                return value
            _checked.add(marker)
            disagreement = check(value)
            if disagreement is None:
                return value
            logger.warning("a probe disagrees with the cached %s now (%s): measuring it again", what, disagreement)
    _checked.add(marker)
    entry = measure()
    if path is not None:
        table = read_table(path)
        table[key] = entry
        write_table(path, table)
    return parse(entry)
