"""Two decoders side by side: one pass of each in turn, each pass timed alone.

The app's AR-vs-BiTA view drives two step streams with ``race``. Alternating single passes
keeps the comparison fair on a shared machine: both see the same load at the same moments,
and the clock counts only each decoder's own passes (``StepRecord.seconds``). A decoder that overlaps its
passes (bita_steps on a GPU) hands over a record while its next pass still runs: the race then waits for the
device (``drain``) before the other decoder's turn and charges that wait to the one whose pass it was, so
neither decoder's pass runs in the other's turn, nor outside both clocks.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial

from ..decode.records import StepRecord
from ..generate import Request, stream_ar, stream_bita
from ..model.adapter import BitaAdapter
from ..model.loading import LoadedModel
from ..runtime.device import synchronize


@dataclass
class Lane:
    """One decoder's progress: its records so far and the tokens they emitted."""

    name: str
    records: list[StepRecord] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    finished: bool = False
    drained: float = 0.0  # seconds waited for this decoder's passes still running after it handed a record over

    @property
    def seconds(self) -> float:
        return sum(r.seconds for r in self.records) + self.drained

    @property
    def tokens_per_s(self) -> float:
        return len(self.tokens) / self.seconds if self.seconds > 0 else 0.0

    @property
    def passes(self) -> int:
        return len(self.records)

    def advance(self, steps: Iterator[StepRecord], drain: Callable[[], None] | None = None) -> None:
        """Take one pass from ``steps`` and wait for the device (``drain``, where given), timing the wait; mark the
        lane finished when the stream ends or stops."""
        record = next(steps, None)
        if drain is not None:
            started = time.perf_counter()
            drain()
            self.drained += time.perf_counter() - started
        if record is None:
            self.finished = True
            return
        self.records.append(record)
        self.tokens.extend(record.emitted)
        self.finished = record.finish is not None


def drafted(lane: Lane) -> bool:
    """Whether some pass of ``lane`` emitted more than its own token (accepted a draft); if not,
    it did the same work as plain AR, and a tok/s ratio against AR is noise."""
    return len(lane.tokens) > lane.passes


def speedup(lane: Lane, baseline: Lane) -> float:
    """lane tokens/s over baseline tokens/s (0 until both have timed passes)."""
    return lane.tokens_per_s / baseline.tokens_per_s if baseline.tokens_per_s > 0 else 0.0


def race(first: tuple[str, Iterator[StepRecord]], second: tuple[str, Iterator[StepRecord]],
         drain: Callable[[], None] | None = None) -> Iterator[tuple[Lane, Lane]]:
    """Alternate one pass of each stream until both finish, yielding both lanes after every round; ``drain``
    waits for the device both run on (none: a CPU, whose work is done when queued)."""
    lanes = (Lane(first[0]), Lane(second[0]))
    streams = (first[1], second[1])
    while not all(lane.finished for lane in lanes):
        for lane, steps in zip(lanes, streams):
            if not lane.finished:
                lane.advance(steps, drain)
        yield lanes


def ar_and_bita(loaded: LoadedModel, adapter: BitaAdapter, request: Request) -> Iterator[tuple[Lane, Lane]]:
    """Plain AR and BiTA racing on ``request`` (``race``, waiting for the model's device between turns): the app's
    race as one stream of model work."""
    return race(("AR", stream_ar(loaded, request)), ("BiTA", stream_bita(loaded, adapter, request)),
                partial(synchronize, loaded.device))
