"""How the app runs model work: on one model thread (model_thread.py), or on a ZeroGPU Space inside
``spaces.GPU`` functions (zero_gpu.py). The engine (engine.py) takes one and sends all model work through it."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Protocol, TypeVar

from .model_thread import ModelThread

T = TypeVar("T")


class ModelWork(Protocol):
    """Where the app's model work runs."""

    def call(self, function: Callable[..., T], *args, **kwargs) -> T:
        """``function(*args, **kwargs)``'s result: the load, and the setup a request's settings need."""

    def stream(self, function: Callable[..., Iterator[T]], model, *args, **kwargs) -> Iterator[T]:
        """The items of ``function(model, *args, **kwargs)``: a request's decoding. ``model``, the loaded model,
        stays where the work runs; the other arguments and the items may be copied across (pickled)."""


def on_zero_gpu(environ: Mapping[str, str]) -> bool:
    """Whether this is a ZeroGPU Space (``SPACES_ZERO_GPU`` true, as the ``spaces`` package reads it)."""
    return environ.get("SPACES_ZERO_GPU", "").lower() in ("1", "t", "true")


def model_work_for(environ: Mapping[str, str]) -> ModelWork:
    """ZeroGPU's ``spaces.GPU`` functions on a ZeroGPU Space (``spaces`` is imported only there), else the model
    thread."""
    if on_zero_gpu(environ):
        from .zero_gpu import ZeroGpuWork

        return ZeroGpuWork()
    return ModelThread()
