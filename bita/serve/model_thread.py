"""One dedicated thread for all model work in a threaded server such as the app.

PyTorch's CPU kernels run their parallel regions on an OpenMP (libgomp) team owned by the
calling thread. Measured on this 2-core machine: once one thread (say, the one that loaded
the model) has used OpenMP, passes run from any other thread are ~1.6x slower (74 vs 48 ms
an AR pass), while a thread that does all the work itself keeps full speed. So the server
loads, plans and decodes on one thread and hands results to its request threads.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
THREAD_NAME = "bita-model"


class ModelThread:
    """Runs callables, and the steps of iterators, one at a time on a single worker thread."""

    def __init__(self) -> None:
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=THREAD_NAME)

    def call(self, function: Callable[..., T], *args, **kwargs) -> T:
        """``function(*args, **kwargs)`` on the model thread; its result or its exception."""
        return self._executor.submit(function, *args, **kwargs).result()

    def iterate(self, items: Iterator[T]) -> Iterator[T]:
        """The items of ``items``, each produced on the model thread (between items, nothing runs); where the
        consumer stops early (a visitor who leaves), ``items`` is closed on the model thread, so that what it holds
        (a cache, the request's thread count) is given back before the next request, not whenever it is collected."""
        done = object()
        try:
            while (item := self.call(next, items, done)) is not done:
                yield item
        finally:
            close = getattr(items, "close", None)
            if close is not None and threading.current_thread().name.startswith(THREAD_NAME):
                close()  # collected on the model thread itself: waiting for it would wait forever
            elif close is not None:
                self.call(close)

    def stream(self, function: Callable[..., Iterator[T]], *args, **kwargs) -> Iterator[T]:
        """The items of ``function(*args, **kwargs)``: the iterator made, and each item produced, on the
        model thread (the ``ModelWork`` of a CPU or CUDA machine, model_work.py)."""
        return self.iterate(self.call(function, *args, **kwargs))
