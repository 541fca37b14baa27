"""The chat's answers as files, and files as answers: "Download this decoding" gives the inspected answer's playback
page (viz/playback.py) and its saved decoding (bita/saved.py); "Open a saved decoding" shows a file that
``generate --save`` or a download wrote in the chat, coloured as the chat colours it, once it is found to be this
model's and one of the adapters the page offers.

A chat answer's and a branch's records already carry what the page shows (the chat records each pass's attention
mask and verdicts): a download adds the names and weights fingerprints of the model and adapter and each token's
text. Neither handler runs the model; the fingerprints are read where model work runs.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import gradio as gr

from viz.acceptance import depth_figure
from viz.notice import notice_figure
from viz.passes import tokens_per_pass_figure
from viz.playback import playback_html, summary

from ..errors import BitaError
from ..generate import Request, RunResult
from ..saved import SavedDecoding, check_origin, read_saved, saved_run
from .engine import Engine
from .handlers import NOTHING_DRAFTED, best_pass, shown_on_page
from .inspector import Inspector
from .session import Conversation, Turn

MAX_OPENED_MB = 32  # the largest saved decoding the page opens (a 1024-token answer saves about 2 MB)
NOT_SAVED = ("Opened from a file: what auto forecast for it and the pass costs that judge its speed belong to the "
             "machine that decoded it, and are not saved.")


def saved_answer(engine: Engine, turn: Turn) -> SavedDecoding:
    """``turn`` as a saved decoding: the one it was opened from, else one made of its records (its seconds: its
    passes'), its settings, and the model and adapter that decoded it."""
    if turn.saved is not None:
        return turn.saved
    settings, records, tokens = turn.settings, turn.records, turn.tokens
    run = RunResult("bita", tokens, engine.text(tokens), sum(r.seconds for r in records), records[-1].finish,
                    records)
    request = Request(turn.prompt_ids, settings.max_new_tokens, settings.plan, settings.drafts,
                      sampling=settings.sampling)
    return engine.work.call(saved_run, run, engine.loaded, request, settings.adapter, settings.adapter_name)


def opened_decoding(engine: Engine, path: Path) -> SavedDecoding:
    """The saved decoding in the uploaded file ``path``, checked whole (``read_saved``), made by the loaded model's
    weights and, where it drafted with an adapter, by one the page offers; BitaError in one line otherwise."""
    megabytes = path.stat().st_size / 2**20
    if megabytes > MAX_OPENED_MB:
        raise BitaError(f"{path.name} holds {megabytes:.1f} MB: the app opens saved decodings of up to "
                        f"{MAX_OPENED_MB} MB")
    saved = read_saved(path, where=path.name)
    engine.work.call(check_origin, saved, engine.loaded)
    origin = saved.origin
    if origin.adapter_fingerprint is not None and origin.adapter_fingerprint not in engine.offered_fingerprints():
        named = f"{Path(origin.adapter).name}, " if origin.adapter else ""
        raise BitaError(f"{path.name} was made with an adapter this app does not offer ({named}weights "
                        f"{origin.adapter_fingerprint}): it offers {', '.join(engine.adapter_names)}")
    return saved


class DecodingFiles:
    """The handlers of "Download this decoding" and "Open a saved decoding"; the files a download writes live in a
    folder of this process's, removed when it ends."""

    def __init__(self, engine: Engine, inspector: Inspector):
        self.engine = engine
        self.inspector = inspector
        self.folder = tempfile.TemporaryDirectory(prefix="bita-decodings-")

    def download(self, conversation: Conversation, inspected) -> list[str]:
        """The inspected answer (the last, a clicked one, or the branch) as two files: its playback page (HTML, opens
        from disk) and its saved decoding (JSON, opens here); gr.Error before any answer or while it streams."""
        if not conversation.has(inspected) or not conversation.answer(inspected).records:
            raise gr.Error("Send a message first: the answer the inspector shows is the one that downloads.")
        turn = conversation.answer(inspected)
        if turn.streaming:
            raise gr.Error("This answer is still streaming: wait for it to finish (or press Stop), then download it.")
        with shown_on_page():
            saved = saved_answer(self.engine, turn)
        stem = "bita-" + conversation.label(inspected).removeprefix("the ").replace(" ", "-")
        folder = Path(tempfile.mkdtemp(dir=self.folder.name))
        page, data = folder / f"{stem}.html", folder / f"{stem}.json"
        page.write_text(playback_html(saved), encoding="utf-8")
        data.write_text(saved.to_json(), encoding="utf-8")
        return [str(page), str(data)]

    def opened(self, path: str | None) -> tuple:
        """The saved decoding uploaded as ``path`` shown in the chat, as a conversation of its own that a message
        then replaces: (chat as shown, plain answer, status line, conversation, inspected answer, branch view, replay
        record, 6 pass views, 4 answer figures); gr.Error in one line for a file that is not this model's."""
        if not path:
            raise gr.Error("Choose a saved decoding: a .json file written by generate --save or a download here.")
        engine = self.engine
        with shown_on_page():
            saved = opened_decoding(engine, Path(path))
        conversation = Conversation.of_saved(saved, engine.decode(saved.prompt_ids))
        records = conversation.answer(-1).records
        status = f"Opened {Path(path).name}: {summary(saved)}. A message sent now starts a new chat."
        depth = depth_figure(records) if any(r.nodes for r in records) else notice_figure(NOTHING_DRAFTED)
        return (conversation.shown(engine.decode), saved.text, status, conversation, -1, "", "",
                *self.inspector.pass_views(conversation, -1, best_pass(records)), tokens_per_pass_figure(records),
                depth, notice_figure(NOT_SAVED), notice_figure(NOT_SAVED))
