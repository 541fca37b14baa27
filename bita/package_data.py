"""Files that ship inside the ``bita`` package: ``bita/assets`` holds the shipped adapters, their
training data sets (the corpus chain's default texts) and the app page's script and style.

In the repository ``bita/assets`` is a link to the top-level ``assets/`` folder; a built wheel holds
the files themselves (pyproject.toml's package data), so a checkout and an installed package find
them at the same place, inside the package.

``cache_root()`` is where bita keeps what it makes (converted models, measured tables, the native
library): ``$BITA_CACHE``, else ``~/.cache/bita``.
"""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
ASSETS = PACKAGE / "assets"  # paths recorded as "assets/..." (an adapter's training data) resolve against PACKAGE
ADAPTERS = ASSETS / "adapters"
DATA = ASSETS / "data"


def cache_root() -> Path:
    """The folder bita keeps what it makes in: ``$BITA_CACHE``, else ``~/.cache/bita``."""
    return Path(os.environ.get("BITA_CACHE", Path.home() / ".cache" / "bita"))
