"""``python app.py`` in a child process on a free local port, for the app's tests, the Space build
test and the load benchmark: started, waited for until it serves, stopped."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ..errors import BitaError

SERVING = "Running on"  # what Gradio prints once the page is served


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass(frozen=True)
class RunningApp:
    """A served app: its URL and how long it took from process start to serving."""

    url: str
    start_s: float


@contextmanager
def running_app(folder: Path, log: Path, args: tuple[str, ...] = (), python: str = sys.executable,
                env: Mapping[str, str] | None = None, timeout_s: float = 900) -> Iterator[RunningApp]:
    """``python app.py --port N *args`` in ``folder`` with ``env`` over this environment, its output
    in ``log``; BitaError (with the log's tail) if it exits or has not served within ``timeout_s``.
    Stopped on leaving."""
    port = free_port()
    environment = {**os.environ, "GRADIO_ANALYTICS_ENABLED": "False", **(env or {})}
    log.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    with log.open("w") as out:
        server = subprocess.Popen([python, "app.py", "--port", str(port), *args], cwd=folder, env=environment,
                                  stdout=out, stderr=subprocess.STDOUT)
    try:
        while SERVING not in log.read_text():
            if server.poll() is not None or time.perf_counter() - started > timeout_s:
                raise BitaError(f"the app did not start:\n{log.read_text()[-3000:]}")
            time.sleep(0.5)
        yield RunningApp(f"http://127.0.0.1:{port}/", time.perf_counter() - started)
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
