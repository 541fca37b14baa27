"""The handlers that run the model: the chat's streaming answer and the AR-vs-BiTA race.

Both take the Settings controls last (see ``ModelHandlers.settings_of``) and stream page updates.
Pass timings never include the page's updates: records time their own passes only.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypeVar

import gradio as gr

from viz.acceptance import depth_figure, forecast_figure
from viz.notice import notice_figure
from viz.passes import tokens_per_pass_figure
from viz.race import race_figure
from viz.tokens import legend_html, output_html

from ..decode.records import StepRecord
from ..decode.sampling import Sampling
from ..drafts.sources import DEFAULT_DRAFTS
from ..errors import BitaError
from ..generate import Request, stream_ar, stream_bita
from ..model.adapter import BitaAdapter
from ..model.loading import encode_chat
from ..plan.tree_plan import TreePlan
from .engine import Engine
from .inspector import Inspector
from .race import race
from .reports import race_table, status_line
from .session import Conversation, Turn

T = TypeVar("T")

UI_INTERVAL_S = 0.2  # chat: at most ~5 screen updates a second
# The race updates the page less often, and after each update lets it draw before the next pass:
# a browser on the same machine (a teaching laptop, CI) would otherwise take a core from the passes.
RACE_UI_INTERVAL_S = 0.5
RACE_SETTLE_S = 0.25  # not counted: the lanes' clocks run only during passes


def throttled(stream: Iterator[T], interval: float) -> Iterator[T]:
    """Items of ``stream``, skipping those that come within ``interval`` seconds of the last
    one let through; the final item always comes."""
    last, held = 0.0, None
    for item in stream:
        held = item
        if time.perf_counter() - last >= interval:
            last, held = time.perf_counter(), None
            yield item
    if held is not None:
        yield held


@contextmanager
def shown_on_page() -> Iterator[None]:
    """A BitaError raised inside becomes a gr.Error: the page shows its message, no traceback."""
    try:
        yield
    except BitaError as error:
        raise gr.Error(str(error)) from None


@dataclass(frozen=True)
class Settings:
    """What one request runs with: the adapter, its tree plan, the answer's length and the sampling."""

    adapter: BitaAdapter
    plan: TreePlan
    max_new_tokens: int
    sampling: Sampling


def seed_of(text: str | int | None) -> int | None:
    """The seed typed in the settings box: None when blank (a new one per answer); BitaError unless
    a whole number (the range is ``Sampling``'s to check)."""
    seed = str(text or "").strip()
    if seed and not seed.isdigit():
        raise BitaError(f"seed must be a whole number (or blank: a new one per answer), not {seed!r}")
    return int(seed) if seed else None


def answer_figures(records: list[StepRecord], plan: TreePlan) -> tuple:
    """One answer's acceptance per depth, and auto's forecast against the tokens/s it measured."""
    if plan.tree is None or not any(r.nodes for r in records):
        empty = notice_figure("This answer drafted nothing (plain AR passes): no acceptance to show.")
        return empty, empty
    tokens, seconds = sum(len(r.emitted) for r in records), sum(r.seconds for r in records)
    if not plan.ranking:
        forecast = notice_figure(f"The tree {plan.spec} was asked for, so auto forecast nothing: choose tree "
                                 "'auto' to see the shapes it weighs.")
    else:
        forecast = forecast_figure(plan.ranking, plan.ar_tokens_per_second, plan.spec,
                                   tokens / max(seconds, 1e-9), tokens / len(records))
    return depth_figure(records), forecast


class ModelHandlers:
    """The chat and race handlers over the shared ``engine``; the chat's last update opens the
    answer's best pass in ``inspector``. Bad input raises gr.Error, which the page shows."""

    def __init__(self, engine: Engine, inspector: Inspector):
        self.engine = engine
        self.inspector = inspector

    def settings_of(self, adapter_name, tree, max_new_tokens, drafts, temperature, top_p, top_k, seed,
                    drafting: bool = False) -> Settings:
        """The Settings of a request's controls, in the API's order (blank ones take their defaults);
        ``drafting``: see ``Engine.setup``."""
        with shown_on_page():
            sampling = Sampling(float(temperature or 0), float(1 if top_p is None else top_p), int(top_k or 0),
                                seed_of(seed))
            adapter, plan = self.engine.setup(adapter_name or self.engine.default_adapter,
                                              (tree or "auto").strip(), drafts or DEFAULT_DRAFTS, drafting, sampling)
        return Settings(adapter, plan, int(max_new_tokens), sampling)

    def chat(self, message, conversation: Conversation, *settings):
        """The answer to ``message``, streamed: (chat as shown, plain answer, status line, conversation,
        message box, inspected answer, 5 pass views, 3 answer figures); the last 9 only at the end."""
        message = (message or "").strip()
        if not message:
            raise gr.Error("Type a message first.")
        request, engine = self.settings_of(*settings, drafting=True), self.engine
        messages = conversation.messages + [{"role": "user", "content": message}]
        turn = Turn(encode_chat(engine.loaded.tokenizer, messages))
        with shown_on_page():
            steps = engine.thread.call(stream_bita, engine.loaded, request.adapter, Request(
                turn.prompt_ids, request.max_new_tokens, request.plan, sampling=request.sampling,
                record_attention=True, record_verdicts=True))
        updated = Conversation(messages, conversation.turns + [turn])
        earlier = conversation.shown(engine.decode)  # rendered once; each update renders only the new turn

        def progress():
            for record in engine.thread.iterate(steps):
                turn.records.append(record)
                yield record

        def answer_view():
            """(chat as shown, plain answer, status line) as the answer stands."""
            return (earlier + updated.shown(engine.decode, since=len(earlier)), engine.text(turn.tokens),
                    status_line(turn.records, request.plan, request.sampling, engine.device))

        for _ in throttled(progress(), UI_INTERVAL_S):
            updated.messages = messages + [{"role": "assistant", "content": engine.text(turn.tokens)}]
            yield *answer_view(), updated, "", *([gr.skip()] * 9)
        shown = max(range(len(turn.records)), key=lambda i: (len(turn.records[i].accepted), i))  # best pass, latest
        records = [r for t in updated.turns for r in t.records]
        yield (*answer_view(), updated, "", -1, *self.inspector.pass_views(updated, -1, shown),
               tokens_per_pass_figure(records), *answer_figures(turn.records, request.plan))

    def side_by_side(self, prompt, *settings):
        """Plain AR and BiTA racing on ``prompt``, one pass each in turn, streamed: (AR text,
        BiTA's coloured tokens, race table, race figure)."""
        prompt = (prompt or "").strip()
        if not prompt:
            raise gr.Error("Type a prompt first.")
        request, engine = self.settings_of(*settings), self.engine
        ids = encode_chat(engine.loaded.tokenizer, [{"role": "user", "content": prompt}])
        with shown_on_page():
            asked = Request(ids, request.max_new_tokens, request.plan, sampling=request.sampling)
            ar = engine.thread.call(stream_ar, engine.loaded, asked)
            bita = engine.thread.call(stream_bita, engine.loaded, request.adapter, asked)
        for ar_lane, bita_lane in throttled(engine.thread.iterate(race(("AR", ar), ("BiTA", bita))),
                                            RACE_UI_INTERVAL_S):
            yield (engine.text(ar_lane.tokens), legend_html() + output_html(bita_lane.records, engine.decode),
                   race_table(ar_lane, bita_lane, request.plan, request.sampling, engine.device),
                   race_figure([(lane.name, lane.records) for lane in (ar_lane, bita_lane)]))
            time.sleep(RACE_SETTLE_S)
