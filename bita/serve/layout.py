"""The page's components, laid out in the order the page shows them; page.py wires their events.

``layout`` builds the whole page inside an open ``gr.Blocks`` and returns its components as a
``Page``, grouped by where they sit: the Settings accordion, the chat tab with the inspector, and
the race tab.
"""

from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from viz.tokens import legend_html

from ..decode.sampling import MAX_TEMPERATURE
from ..drafts.sources import DRAFT_OPTIONS
from .engine import Engine
from .reports import introduction
from .session import Conversation

TREES = ["auto", "efficient:3/chain-groups", "chain:1", "chain:3", "efficient:3,2,2/chain-groups", "efficient:3,2,2",
         "efficient:5,4,3", "full:3,3,3"]
DEFAULT_NEW_TOKENS = 128
PLAY_INTERVAL_S = 1.0  # the inspector's play: one pass a second
RACE_PROMPT = "Write a Python function that checks whether a word is a palindrome."


@dataclass(frozen=True)
class ChatTab:
    """The chat: the conversation, the message box and its buttons, the status line, a download of the inspected
    answer and an upload of a saved decoding, the downloaded files, and two hidden boxes: the last answer as plain
    text (for Copy answer) and the token clicked (from app.js)."""

    chatbot: gr.Chatbot
    copy_answer: gr.Button
    message: gr.Textbox
    send: gr.Button
    stop: gr.Button
    clear: gr.Button
    status: gr.Markdown
    download: gr.Button
    open_saved: gr.UploadButton
    downloaded: gr.File
    answer: gr.Textbox
    picked: gr.Textbox


@dataclass(frozen=True)
class InspectorPanel:
    """The inspector under the chat: previous, play and next, and the views of one pass."""

    back: gr.Button
    play: gr.Button
    forward: gr.Button
    pass_index: gr.Slider
    timer: gr.Timer
    tree_plot: gr.Plot
    passes_plot: gr.Plot
    pass_story: gr.Markdown
    alternatives_plot: gr.Plot
    warp_plot: gr.Plot
    attention_plot: gr.Plot
    depth_plot: gr.Plot
    forecast_plot: gr.Plot
    speedup_plot: gr.Plot
    force_choice: gr.Dropdown
    force: gr.Button
    branch_view: gr.HTML
    replay: gr.Code

    @property
    def views(self) -> list:
        """What ``Inspector.pass_views`` fills: slider, draft tree, story, attention, a token's alternatives and
        how it was drawn."""
        return [self.pass_index, self.tree_plot, self.pass_story, self.attention_plot, self.alternatives_plot,
                self.warp_plot]

    @property
    def answer_views(self) -> list:
        """What ``answer_figures`` fills: tokens per pass, acceptance per depth, forecast vs measured, where the
        speed comes from."""
        return [self.passes_plot, self.depth_plot, self.forecast_plot, self.speedup_plot]


@dataclass(frozen=True)
class RaceTab:
    """AR vs BiTA: the prompt, the race button, and what the race shows."""

    prompt: gr.Textbox
    go: gr.Button
    stats: gr.Markdown
    plot: gr.Plot
    speedup_plot: gr.Plot
    ar_text: gr.Textbox
    bita_view: gr.HTML

    @property
    def outputs(self) -> list:
        """What ``ModelHandlers.side_by_side`` fills: AR text, BiTA tokens, table, figure, where the speed came from."""
        return [self.ar_text, self.bita_view, self.stats, self.plot, self.speedup_plot]


@dataclass(frozen=True)
class Page:
    """Every component the page's events use, and the session's states."""

    conversation: gr.State  # the session's Conversation
    inspected: gr.State  # which answer the inspector shows (-1: the last)
    playing: gr.State  # whether the inspector plays
    settings: list  # the Settings controls, in the API's order
    chat: ChatTab
    inspector: InspectorPanel
    race: RaceTab


def layout(engine: Engine, tree: str, drafts: str, max_new_tokens: int) -> Page:
    """The page, inside an open ``gr.Blocks``; ``tree`` and ``drafts``: the settings it opens with;
    ``max_new_tokens``: the most new tokens a request may ask for."""
    conversation = gr.State(Conversation())
    inspected = gr.State(-1)
    playing = gr.State(False)
    gr.Markdown(introduction(engine.loaded.name, engine.device, engine.loaded.exact))
    settings = settings_accordion(engine, tree, drafts, max_new_tokens)
    with gr.Tab("Chat"):
        chat = chat_tab()
        inspector = inspector_panel()
    with gr.Tab("AR vs BiTA"):
        race = race_tab()
    return Page(conversation, inspected, playing, settings, chat, inspector, race)


def settings_accordion(engine: Engine, tree: str, drafts: str, max_new_tokens: int) -> list:
    """The Settings accordion's controls in the API's order: the optional ones last, so API calls
    may leave them out. The length slider's maximum is ``max_new_tokens``: the API refuses more."""
    with gr.Accordion("Settings", open=False):
        adapter_box = gr.Dropdown(engine.adapter_names, value=engine.default_adapter, label="adapter")
        tree_box = gr.Dropdown(TREES, value=tree, allow_custom_value=True, label="draft tree",
                               info="auto: in the chat the best drafting tree for this device; in the race the "
                                    "fastest, or none where none pays")
        drafts_box = gr.Dropdown(list(DRAFT_OPTIONS), value=drafts, label="drafts",
                                 info="who drafts: the adapter's mask groups, context n-grams (prompt lookup; "
                                      "diamonds in the draft tree, dotted underlines), both merged in one tree, or "
                                      "all: both and the model's own past answers (stars, wavy orange underlines)")
        length_box = gr.Slider(1, max_new_tokens, value=min(DEFAULT_NEW_TOKENS, max_new_tokens), step=1,
                               label="max new tokens")
        with gr.Row():
            temperature_box = gr.Slider(0, min(2.0, MAX_TEMPERATURE), value=0, step=0.05, label="temperature",
                                        info="0: greedy; above 0: sampled, exactly from AR's distribution",
                                        min_width=200)
            top_p_box = gr.Slider(0.05, 1, value=1, step=0.05, label="top-p", info="1: off", min_width=200)
            top_k_box = gr.Slider(0, 200, value=0, step=1, label="top-k", info="0: off", min_width=200)
            seed_box = gr.Textbox("", label="seed", info="blank: a new seed per answer, shown in the status line",
                                  min_width=200)
    return [adapter_box, tree_box, length_box, drafts_box, temperature_box, top_p_box, top_k_box, seed_box]


def chat_tab() -> ChatTab:
    """The chat's components, from the colour legend to the hidden boxes."""
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
    with gr.Row():
        download = gr.Button("Download this decoding", size="sm", min_width=80, elem_id="download")
        open_saved = gr.UploadButton("Open a saved decoding", file_types=[".json"], size="sm", min_width=80,
                                     elem_id="open-saved")
    downloaded = gr.File(label="the inspected answer: its playback page (HTML, opens from disk) and its saved "
                               "decoding (JSON, opens here)", file_count="multiple", interactive=False, visible=False,
                         elem_id="downloaded")
    answer = gr.Textbox(visible="hidden", elem_id="answer")
    picked = gr.Textbox(visible="hidden", elem_id="picked")
    return ChatTab(chatbot, copy_answer, message, send, stop, clear, status, download, open_saved, downloaded,
                   answer, picked)


def inspector_panel() -> InspectorPanel:
    """The inspector's accordion, open: one forward pass at a time."""
    with gr.Accordion("Inspector: one forward pass at a time", open=True):
        with gr.Row():
            back = gr.Button("◀ Previous", size="sm", min_width=80)
            play = gr.Button("▶ Play", size="sm", min_width=80)
            forward = gr.Button("Next ▶", size="sm", min_width=80)
        pass_index = gr.Slider(0, 1, value=0, step=1, label="forward pass of the last answer", interactive=False)
        timer = gr.Timer(PLAY_INTERVAL_S, active=False)
        with gr.Row():
            tree_plot = gr.Plot(label="draft tree", min_width=340, elem_id="tree-plot")
            passes_plot = gr.Plot(label="tokens per pass", min_width=340)
        with gr.Row():
            pass_story = gr.Markdown(min_width=340, elem_id="pass-story")
            alternatives_plot = gr.Plot(label="why this token: the verifier's top 5 (click a token in the chat)",
                                        min_width=340, elem_id="alternatives-plot")
        warp_plot = gr.Plot(label="how a sampled token was drawn: the warp and the cut (click a token)",
                            elem_id="warp-plot")
        with gr.Row():
            force_choice = gr.Dropdown([], label="what if: force another token here (click a token first)",
                                       allow_custom_value=True, info="the clicked token's alternatives, or type "
                                       "POSITION:TOKEN (ids); the branch decodes with the answer's settings",
                                       elem_id="force-choice", min_width=300)
            force = gr.Button("Force it and continue", size="sm", min_width=120)
        branch_view = gr.HTML(elem_id="branch")
        replay = gr.Code(language="json", label="replay record: python -m bita replay FILE (bita.branch.replay)",
                         elem_id="replay", lines=3)
        attention_plot = gr.Plot(label="tree attention (hover a cell: why it is on or off)")
        with gr.Row():
            depth_plot = gr.Plot(label="acceptance per depth", min_width=340, elem_id="depth-plot")
            forecast_plot = gr.Plot(label="what auto expected, and what this answer measured", min_width=340,
                                    elem_id="forecast-plot")
        speedup_plot = gr.Plot(label="where the speed comes from: tau against step cost", elem_id="speedup-plot")
    return InspectorPanel(back, play, forward, pass_index, timer, tree_plot, passes_plot, pass_story,
                          alternatives_plot, warp_plot, attention_plot, depth_plot, forecast_plot, speedup_plot,
                          force_choice, force,
                          branch_view, replay)


def race_tab() -> RaceTab:
    """The race's prompt and button, its table and figure, and the two answers side by side."""
    prompt = gr.Textbox(label="prompt", value=RACE_PROMPT)
    go = gr.Button("Race", variant="primary")
    stats = gr.Markdown()
    plot = gr.Plot(label="tokens against time", elem_id="race-plot")
    with gr.Row():
        ar_text = gr.Textbox(label="plain AR", lines=12, min_width=300)
        bita_view = gr.HTML(label="BiTA", min_width=300)
    speedup_plot = gr.Plot(label="where the speed came from: BiTA's tau and step cost, and the speedup raced",
                           elem_id="race-speedup-plot")
    return RaceTab(prompt, go, stats, plot, speedup_plot, ar_text, bita_view)
