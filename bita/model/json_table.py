"""The JSON tables cached under ``~/.cache/bita`` (kernel plans, pass costs, precision probes): one
writer, so concurrent processes never read a half-written file."""

from __future__ import annotations

import json
import os
from pathlib import Path


def write_table(path: Path, table: dict) -> None:
    """Write ``table`` as JSON to ``path`` atomically (a file of this process, then renamed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(f".{os.getpid()}.tmp")
    temporary.write_text(json.dumps(table, indent=1))
    temporary.replace(path)
