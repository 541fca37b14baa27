"""The handlers that run the model: the chat's streaming answer, a what-if branch of it, and the AR-vs-BiTA race.

Both take the Settings controls last (see ``ModelHandlers.settings_of``) and stream page updates.
Pass timings never include the page's updates: records time their own passes only.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

import gradio as gr

from viz.acceptance import depth_figure, forecast_figure
from viz.branch import branch_html
from viz.notice import notice_figure
from viz.passes import tokens_per_pass_figure
from viz.race import race_figure
from viz.speedup import speedup_figure
from viz.tokens import legend_html, output_html

from ..branch import BranchRecord, check_branch, stream_branch
from ..decode.records import StepRecord
from ..decode.sampling import Sampling
from ..drafts.sources import DEFAULT_DRAFTS
from ..errors import BitaError
from ..generate import Request, stream_bita
from ..model.loading import encode_chat
from ..plan.autotree import CostTable
from ..plan.speedup import answer_point
from ..plan.tree_plan import TreePlan
from .engine import Engine
from .inspector import Inspector
from .race import Lane, ar_and_bita, drafted, speedup
from .reports import race_table, status_line
from .session import BRANCH, Conversation, Settings, Turn

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


def seed_of(text: str | int | None) -> int | None:
    """The seed typed in the settings box: None when blank (a new one per answer); BitaError unless
    a whole number (the range is ``Sampling``'s to check)."""
    seed = str(text or "").strip()
    if seed and not seed.isdigit():
        raise BitaError(f"seed must be a whole number (or blank: a new one per answer), not {seed!r}")
    return int(seed) if seed else None


def best_pass(records: list[StepRecord]) -> int:
    """The index of the pass that accepted most (the latest of those): where the inspector opens."""
    return max(range(len(records)), key=lambda i: (len(records[i].accepted), i))


def drafted_nothing(records: list[StepRecord], plan: TreePlan) -> bool:
    """Whether an answer's passes were all plain AR: nothing to show of acceptance or speed."""
    return plan.tree is None or not any(r.nodes for r in records)


NOTHING_DRAFTED = "This answer drafted nothing (plain AR passes): no acceptance to show."


def speed_figure(records: list[StepRecord], plan: TreePlan, costs: CostTable, device: str,
                 raced: float | None = None):
    """Where an answer's speed comes from: its tau and step cost against this machine's pass costs ``costs``
    (``raced``: the speedup a race measured)."""
    if drafted_nothing(records, plan):
        return notice_figure(NOTHING_DRAFTED)
    return speedup_figure(costs, answer_point(records, costs.ar, raced), device)


def answer_figures(records: list[StepRecord], plan: TreePlan, costs: CostTable, device: str) -> tuple:
    """One answer's acceptance per depth, auto's forecast against the tokens/s it measured, and where its speed
    comes from (``speed_figure``)."""
    if drafted_nothing(records, plan):
        empty = notice_figure(NOTHING_DRAFTED)
        return empty, empty, empty
    tokens, seconds = sum(len(r.emitted) for r in records), sum(r.seconds for r in records)
    if not plan.ranking:
        forecast = notice_figure(f"The tree {plan.spec} was asked for, so auto forecast nothing: choose tree "
                                 "'auto' to see the shapes it weighs.")
    else:
        forecast = forecast_figure(plan.ranking, plan.ar_tokens_per_second, plan.spec,
                                   tokens / max(seconds, 1e-9), tokens / len(records))
    return depth_figure(records), forecast, speed_figure(records, plan, costs, device)


class ModelHandlers:
    """The chat, branch and race handlers over the shared ``engine``; the chat's and a branch's last update
    open the answer's best pass in ``inspector``. Bad input raises gr.Error, which the page shows."""

    def __init__(self, engine: Engine, inspector: Inspector):
        self.engine = engine
        self.inspector = inspector

    def settings_of(self, adapter_name, tree, max_new_tokens, drafts, temperature, top_p, top_k, seed,
                    drafting: bool = False) -> Settings:
        """The Settings of a request's controls, in the API's order (blank ones take their defaults);
        ``drafting``: see ``Engine.setup``."""
        names = (adapter_name or self.engine.default_adapter, (tree or "auto").strip(), drafts or DEFAULT_DRAFTS)
        with shown_on_page():
            sampling = Sampling(float(temperature or 0), float(1 if top_p is None else top_p), int(top_k or 0),
                                seed_of(seed))
            adapter, plan = self.engine.setup(*names, drafting, sampling)
        return Settings(adapter, plan, int(max_new_tokens), sampling, *names)

    def chat(self, message, conversation: Conversation, *settings):
        """The answer to ``message``, streamed: (chat as shown, plain answer, status line, conversation,
        message box, inspected answer, 6 pass views, 4 answer figures); the last 11 only at the end. After a saved
        decoding was opened, the answer starts a new chat."""
        message = (message or "").strip()
        if not message:
            raise gr.Error("Type a message first.")
        request, engine = self.settings_of(*settings, drafting=True), self.engine
        if conversation.opened:  # a saved decoding on view is not a chat to continue
            conversation = Conversation()
        messages = conversation.messages + [{"role": "user", "content": message}]
        turn = Turn(encode_chat(engine.loaded.tokenizer, messages), settings=request)
        asked = Request(turn.prompt_ids, request.max_new_tokens, request.plan, sampling=request.sampling,
                        record_attention=True, record_verdicts=True)
        updated = Conversation(messages, conversation.turns + [turn])
        earlier = conversation.shown(engine.decode)  # rendered once; each update renders only the new turn

        def answer_view():
            """(chat as shown, plain answer, status line) as the answer stands."""
            return (earlier + updated.shown(engine.decode, since=len(earlier)), engine.text(turn.tokens),
                    status_line(turn.records, request.plan, request.sampling, engine.device))

        for _ in throttled(self.streamed(turn, stream_bita, request.adapter, asked), UI_INTERVAL_S):
            updated.messages = messages + [{"role": "assistant", "content": engine.text(turn.tokens)}]
            yield *answer_view(), updated, "", *([gr.skip()] * 11)
        shown = best_pass(turn.records)
        records = [r for t in updated.turns for r in t.records]
        yield (*answer_view(), updated, "", -1, *self.inspector.pass_views(updated, -1, shown),
               tokens_per_pass_figure(records),
               *answer_figures(turn.records, request.plan, engine.pass_costs(request.adapter), engine.device))

    def streamed(self, turn: Turn, steps: Callable[..., Iterator[StepRecord]], *args, **kwargs) \
            -> Iterator[StepRecord]:
        """The records of ``steps(loaded model, *args, **kwargs)``, made where model work runs (``Engine.stream``), each
        appended to ``turn``, which is marked streaming until they end or the page stops them (no branch
        meanwhile). A BitaError (a request the model cannot take) is shown on the page."""
        turn.streaming = True
        try:
            with shown_on_page():
                for record in self.engine.stream(steps, *args, **kwargs):
                    turn.records.append(record)
                    yield record
        finally:
            turn.streaming = False

    def branch_record(self, choice, conversation: Conversation, inspected) -> BranchRecord:
        """The what-if branch ``choice`` ('POSITION:TOKEN') of the inspected answer, checked: gr.Error while
        an answer streams, for a position past the answer or a token id this tokenizer lacks. Runs no model, so
        the page asks it first, off the model's queue (``refused``): a refusal comes at once and changes nothing."""
        with shown_on_page():
            record = conversation.branch_record(inspected, choice)
            check_branch(record, len(self.engine.loaded.tokenizer))
        return record

    def refused(self, choice, conversation: Conversation, inspected) -> None:
        """A branch's first step on the page, unqueued: ``branch_record``'s refusal at once, or nothing."""
        self.branch_record(choice, conversation, inspected)

    def branch(self, choice, conversation: Conversation, inspected):
        """The branch of ``branch_record``, decoded with its answer's settings and streamed: (the original and
        the branch side by side, its replay record as JSON, conversation, inspected answer, 6 pass views);
        the last 7 only at the end, when the inspector opens the branch's best pass."""
        record, engine = self.branch_record(choice, conversation, inspected), self.engine
        settings = conversation.answer(inspected).settings
        conversation.branch = turn = Turn(record.context, settings=settings)  # replaces the last branch

        def shown() -> str:
            return branch_html(record.answer_ids, record.position, record.token, turn.records, engine.decode,
                               BRANCH)

        steps = self.streamed(turn, stream_branch, settings.adapter, settings.plan, record, record_attention=True,
                              record_verdicts=True)
        for _ in throttled(steps, UI_INTERVAL_S):
            yield shown(), record.to_json(), conversation, *([gr.skip()] * 7)
        yield (shown(), record.to_json(), conversation, BRANCH,
               *self.inspector.pass_views(conversation, BRANCH, best_pass(turn.records)))

    def side_by_side(self, prompt, *settings):
        """Plain AR and BiTA racing on ``prompt``, one pass each in turn, streamed: (AR text,
        BiTA's coloured tokens, race table, race figure, and at the end where the speed came from)."""
        prompt = (prompt or "").strip()
        if not prompt:
            raise gr.Error("Type a prompt first.")
        request, engine = self.settings_of(*settings), self.engine
        ids = encode_chat(engine.loaded.tokenizer, [{"role": "user", "content": prompt}])
        asked = Request(ids, request.max_new_tokens, request.plan, sampling=request.sampling)

        def lanes_view(ar_lane: Lane, bita_lane: Lane) -> tuple:
            """(AR text, BiTA's coloured tokens, race table, race figure) as the race stands."""
            return (engine.text(ar_lane.tokens), legend_html() + output_html(bita_lane.records, engine.decode),
                    race_table(ar_lane, bita_lane, request.plan, request.sampling, engine.device),
                    race_figure([(lane.name, lane.records) for lane in (ar_lane, bita_lane)]))

        with shown_on_page():
            for ar_lane, bita_lane in throttled(engine.stream(ar_and_bita, request.adapter, asked),
                                                RACE_UI_INTERVAL_S):
                yield *lanes_view(ar_lane, bita_lane), gr.skip()
                time.sleep(RACE_SETTLE_S)
        raced = speedup(bita_lane, ar_lane) if drafted(bita_lane) else None
        yield *lanes_view(ar_lane, bita_lane), speed_figure(bita_lane.records, request.plan,
                                                            engine.pass_costs(request.adapter), engine.device, raced)
