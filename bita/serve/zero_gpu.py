"""Model work on a ZeroGPU Space: each request's decoding inside a ``spaces.GPU`` function.

ZeroGPU lends a GPU only while a function decorated with ``spaces.GPU`` runs, and runs it in a process forked from
the app's (kept and reused while idle): its arguments go there pickled, and what it returns or yields comes back
pickled. A model is loaded and moved ``.to('cuda')`` outside such functions, at start, and each fork takes it along
in its copy of the process's memory. So here the load (and the setup of a request's settings) runs where it is
called, and a request's decoding runs in one generator function under ``spaces.GPU`` that finds the loaded model in
the worker's copy, by a key: the model itself is never pickled. Generator functions stream: each item is sent back
as it is made. Imported only on ZeroGPU (model_work.py); tested with a stand-in ``spaces`` module, not on a real
ZeroGPU Space (docs/space.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TypeVar

from ..errors import BitaError

T = TypeVar("T")

# The GPU time one request may hold: a race of 256 tokens (a Space's cap) is two decodings of about 256 passes
# each, seconds on a GPU; 60 s is ZeroGPU's default, and a shorter request waits less in its queue.
ZERO_GPU_DURATION_S = 60


class ZeroGpuWork:
    """A ``ModelWork`` (model_work.py) for ZeroGPU: ``call`` here, ``stream`` in a ``spaces.GPU`` function."""

    def __init__(self, duration_s: int = ZERO_GPU_DURATION_S):
        try:
            import spaces
        except ImportError:
            raise BitaError("this is a ZeroGPU Space, and ZeroGPU needs the 'spaces' package (a Gradio Space "
                            "installs it): install it, or pick other hardware in the Space's settings") from None
        models: dict[int, object] = {}  # the loaded models by key, as the forked worker finds them in its copy

        @spaces.GPU(duration=duration_s)
        def decode_on_gpu(function, model_key: int, *args, **kwargs):
            yield from function(models[model_key], *args, **kwargs)

        self._models = models
        self._decode_on_gpu = decode_on_gpu

    def call(self, function: Callable[..., T], *args, **kwargs) -> T:
        """``function(*args, **kwargs)`` in the calling thread, outside any GPU function."""
        return function(*args, **kwargs)

    def stream(self, function: Callable[..., Iterator[T]], model, *args, **kwargs) -> Iterator[T]:
        """The items of ``function(model, *args, **kwargs)``, made inside the ``spaces.GPU`` function."""
        self._models[id(model)] = model
        return self._decode_on_gpu(function, id(model), *args, **kwargs)
