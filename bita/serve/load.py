"""Visitors at once: concurrent API clients (gradio_client) asking a running app's ``/chat``, each
prompt's answer beside its answer asked alone, and how long each visitor waited."""

from __future__ import annotations

import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Answer:
    """One visitor's answer; ``wait_s``: from asking to the first streamed update, ``total_s``: to
    the last."""

    prompt: str
    text: str
    wait_s: float
    total_s: float


@dataclass
class LoadReport:
    """Answers asked at once, beside the same prompts' answers asked one by one."""

    together: list[Answer]
    alone: list[Answer]
    lost: list[str] = field(default_factory=list)  # prompts whose request failed, with why

    @property
    def identical(self) -> int:
        return sum(a.text == b.text for a, b in zip(self.together, self.alone))

    def percentile(self, q: int, key: str = "wait_s") -> float:
        """The q-th percentile (1-99) of the answers' ``key`` when asked at once."""
        values = sorted(getattr(answer, key) for answer in self.together)
        return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]

    def summary(self) -> dict:
        return {"clients": len(self.together) + len(self.lost), "identical": self.identical, "lost": len(self.lost),
                "wait_p50_s": self.percentile(50), "wait_p95_s": self.percentile(95),
                "total_p50_s": self.percentile(50, "total_s"), "total_p95_s": self.percentile(95, "total_s"),
                "alone_total_mean_s": statistics.fmean(answer.total_s for answer in self.alone)}


def ask(url: str, prompt: str, settings: tuple) -> Answer:
    """``prompt`` to ``/chat`` from a new client (a new session), greedy, with the Settings
    ``settings`` (adapter, tree, max new tokens, ...)."""
    from gradio_client import Client

    client = Client(url, verbose=False)
    asked = time.perf_counter()
    job = client.submit(prompt, *settings, api_name="/chat")
    first = None
    for _ in job:
        first = first or time.perf_counter()
    result = job.result()
    done = time.perf_counter()
    return Answer(prompt, result[1], (first or done) - asked, done - asked)


def load_test(url: str, prompts: list[str], settings: tuple) -> LoadReport:
    """Each prompt asked alone, one after another; then all at once, one client each."""
    alone = [ask(url, prompt, settings) for prompt in prompts]
    with ThreadPoolExecutor(max_workers=len(prompts)) as pool:
        futures = [pool.submit(ask, url, prompt, settings) for prompt in prompts]
    together, kept, lost = [], [], []
    for prompt, future, single in zip(prompts, futures, alone):
        try:
            together.append(future.result())
            kept.append(single)
        except Exception as error:  # a lost visitor is a result to report, whatever the cause
            lost.append(f"{prompt}: {error}")
    return LoadReport(together, kept, lost)
