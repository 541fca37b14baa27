"""The app's page: its layout (layout.py) with every event wired to its handler.

Model work (the chat and the race) goes through one queue whose concurrency and length are bounded
(a queued visitor sees their place in it, and one who leaves gives it up); the inspector's events
only draw, and an answer downloaded or a saved decoding opened (decoding_files.py) runs no model either.
The page's script and style are ``bita/assets/app.js`` (a click on a chat token writes
"turn:pass:slot:time" into the hidden #picked box, which opens that pass in the inspector) and
``assets/app.css``, passed to ``launch``.
"""

from __future__ import annotations

import gradio as gr

from ..drafts.sources import DEFAULT_DRAFTS
from ..package_data import ASSETS
from .decoding_files import DecodingFiles
from .engine import Engine
from .handlers import ModelHandlers
from .inspector import Inspector, toggled
from .layout import Page, layout
from .session import Conversation
from .space_runtime import LOCAL, Limits

PAGE_JS = (ASSETS / "app.js").read_text()
PAGE_CSS = (ASSETS / "app.css").read_text()
COPY_JS = "(text) => { navigator.clipboard?.writeText(text); }"
PRIVATE = dict(api_visibility="private")


def build_app(engine: Engine, limits: Limits = LOCAL, concurrency: int = 1, tree: str = "auto",
              drafts: str = DEFAULT_DRAFTS) -> gr.Blocks:
    """The page over ``engine``, queued within ``limits``; ``tree`` and ``drafts``: the settings a page
    opens with. A request over the queue's size is turned away with Gradio's "queue is full"."""
    inspector = Inspector(engine)
    with gr.Blocks(title="BiTA: lossless acceleration, seen pass by pass") as app:
        page = layout(engine, tree, drafts, limits.max_new_tokens)
        wire_model_work(page, ModelHandlers(engine, inspector), concurrency)
        wire_inspector(page, inspector)
        wire_decoding_files(page, DecodingFiles(engine, inspector))
    app.queue(max_size=limits.queue_size)
    return app


def wire_model_work(page: Page, handlers: ModelHandlers, concurrency: int) -> None:
    """The chat (Enter or Send; API ``/chat``), a what-if branch of the inspected answer (Force it and continue;
    API ``/branch``, checked first without the queue) and the race (Race or Enter; API ``/race``), which Stop
    cancels; Clear and Copy answer."""
    chat, race, inspector = page.chat, page.race, page.inspector
    model_work = dict(concurrency_limit=concurrency, concurrency_id="model")
    chat_inputs = [chat.message, page.conversation, *page.settings]
    chat_outputs = [chat.chatbot, chat.answer, chat.status, page.conversation, chat.message, page.inspected,
                    *inspector.views, *inspector.answer_views]
    sent = [chat.message.submit(handlers.chat, chat_inputs, chat_outputs, api_name="chat", **model_work),
            chat.send.click(handlers.chat, chat_inputs, chat_outputs, **PRIVATE, **model_work)]
    force_inputs = [inspector.force_choice, page.conversation, page.inspected]
    checked = inspector.force.click(handlers.refused, force_inputs, None, **PRIVATE)  # not on the model's queue
    branched = checked.success(handlers.branch, force_inputs, [inspector.branch_view, inspector.replay,
                                                               page.conversation, page.inspected, *inspector.views],
                               api_name="branch", **model_work)
    race_inputs = [race.prompt, *page.settings]
    raced = [race.go.click(handlers.side_by_side, race_inputs, race.outputs, api_name="race", **model_work),
             race.prompt.submit(handlers.side_by_side, race_inputs, race.outputs, **PRIVATE, **model_work)]
    chat.stop.click(None, None, None, cancels=[*sent, branched, *raced])
    cleared = [page.conversation, chat.chatbot, chat.answer, chat.status, inspector.branch_view, inspector.replay]
    chat.clear.click(lambda: (Conversation(), [], "", "", "", ""), None, cleared, **PRIVATE)
    chat.copy_answer.click(None, [chat.answer], None, js=COPY_JS)


def wire_inspector(page: Page, inspector: Inspector) -> None:
    """The slider, previous and next, a clicked chat token, and play (a timer tick per pass)."""
    panel = page.inspector
    where = [panel.pass_index, page.conversation, page.inspected]
    panel.pass_index.input(inspector.stepped(0), where, panel.views, trigger_mode="always_last", **PRIVATE)
    panel.back.click(inspector.stepped(-1), where, panel.views, **PRIVATE)
    panel.forward.click(inspector.stepped(1), where, panel.views, **PRIVATE)
    page.chat.picked.change(inspector.picked_token, [page.chat.picked, page.conversation],
                            [page.inspected, *panel.views, panel.force_choice], **PRIVATE)
    panel.play.click(toggled, page.playing, [panel.timer, panel.play, page.playing], **PRIVATE)
    panel.timer.tick(inspector.played, where, [*panel.views, panel.timer, panel.play, page.playing], **PRIVATE)


def wire_decoding_files(page: Page, files: DecodingFiles) -> None:
    """Download this decoding (API ``/download``: the inspected answer's page and saved decoding, then shown until
    the chat changes) and Open a saved decoding (API ``/open``: it shows in the chat and the inspector, as a
    conversation of its own)."""
    chat, inspector = page.chat, page.inspector
    downloaded = chat.download.click(files.download, [page.conversation, page.inspected], chat.downloaded,
                                     api_name="download")
    downloaded.success(lambda: gr.File(visible=True), None, chat.downloaded, **PRIVATE)
    gr.on([chat.message.submit, chat.send.click, chat.clear.click, chat.open_saved.upload],
          lambda: gr.File(value=None, visible=False), None, chat.downloaded, **PRIVATE)  # files of an answer gone
    opened = [chat.chatbot, chat.answer, chat.status, page.conversation, page.inspected, inspector.branch_view,
              inspector.replay, *inspector.views, *inspector.answer_views]
    chat.open_saved.upload(files.opened, chat.open_saved, opened, api_name="open")
