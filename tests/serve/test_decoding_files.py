"""An answer as files and a file as an answer, on a tiny model's engine: a chat turn saves as the run it was, a
download writes its page and its saved decoding, and a saved decoding opens into a conversation of its own, coloured
as the chat colours it, unless it is too big or was drafted by an adapter the page does not offer."""

import json
from pathlib import Path

import gradio as gr
import pytest
from saved_records import tiny_ar_decoding, tiny_decoding, tiny_loaded

from bita.errors import BitaError
from bita.model.shipped import UNTRAINED
from bita.plan.tree_plan import plan_tree
from bita.saved import parse_saved, saved_run
from bita.serve import decoding_files
from bita.serve.decoding_files import DecodingFiles, opened_decoding, saved_answer
from bita.serve.engine import Engine
from bita.serve.inspector import Inspector
from bita.serve.session import Conversation, Settings, Turn
from viz.tokens import output_html


@pytest.fixture(scope="module")
def engine():
    return Engine(tiny_loaded, UNTRAINED)


@pytest.fixture(scope="module")
def files(engine):
    return DecodingFiles(engine, Inspector(engine))


def chat_of_the_tiny_run() -> Conversation:
    """The tiny BiTA run as the chat's one answer, with the settings the chat would keep."""
    loaded, adapter, request, run = tiny_decoding()
    plan = plan_tree(loaded, adapter, request.tree, request.drafts, request.ngram_tokens)
    settings = Settings(adapter, plan, request.max_new_tokens, request.sampling, "random-adapter", request.tree,
                        request.drafts)
    return Conversation([{"role": "user", "content": "hi"}, {"role": "assistant", "content": run.text}],
                        [Turn(request.prompt_ids, list(run.steps), settings)])


def written(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text)
    return path


def test_a_chat_answer_saves_as_its_run_and_downloads_as_its_page_and_file(engine, files):
    loaded, adapter, request, run = tiny_decoding()
    chat = chat_of_the_tiny_run()
    saved = saved_answer(engine, chat.answer(-1))
    expected = saved_run(run, loaded, request, adapter, "random-adapter")
    assert (saved.tokens, saved.text, saved.steps, saved.origin) == (run.tokens, run.text, run.steps, expected.origin)
    assert saved.settings.tree == "efficient:3,2,1+ngram:3" and saved.seconds == sum(r.seconds for r in run.steps)
    page, data = files.download(chat, -1)
    assert Path(page).name == "bita-answer-1.html" and Path(data).name == "bita-answer-1.json"
    assert parse_saved(Path(data).read_text()).tokens == run.tokens
    assert Path(page).read_text().count('class="bita-tok ') == len(run.tokens)


def test_a_download_waits_for_an_answer_to_end(files):
    with pytest.raises(gr.Error, match="Send a message first"):
        files.download(Conversation(), -1)
    chat = chat_of_the_tiny_run()
    chat.turns[0].streaming = True
    with pytest.raises(gr.Error, match="still streaming"):
        files.download(chat, -1)


def test_a_saved_decoding_opens_as_a_chat_of_its_own_coloured_alike(engine, files, tmp_path):
    loaded, _, request, _ = tiny_decoding()
    ar = saved_run(tiny_ar_decoding(), loaded, request)
    shown, answer, status, chat, inspected, *_ = files.opened(str(written(tmp_path, "ar.json", ar.to_json())))
    assert shown[1]["content"] == output_html(ar.steps, engine.decode, turn=0) and answer == ar.text
    assert status.startswith("Opened ar.json: our AR loop on tiny-llama-0") and chat.opened and inspected == -1
    assert files.download(chat, -1)[1].endswith("bita-answer-1.json")  # it downloads again as it came


def test_a_file_too_big_or_of_an_adapter_not_offered_is_refused(engine, tmp_path, monkeypatch):
    loaded, adapter, request, run = tiny_decoding()
    drafted = saved_run(run, loaded, request, adapter, "random-adapter").to_json()
    with pytest.raises(BitaError, match=r"an adapter this app does not offer \(random-adapter, weights .*: it offers "
                                        "untrained"):
        opened_decoding(engine, written(tmp_path, "drafted.json", drafted))
    monkeypatch.setattr(decoding_files, "MAX_OPENED_MB", 0.01)
    with pytest.raises(BitaError, match=r"big.json holds 0.\d MB: the app opens saved decodings of up to 0.01 MB"):
        opened_decoding(engine, written(tmp_path, "big.json", json.dumps({"padding": "x" * 200_000})))
