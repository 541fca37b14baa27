"""generate --save and --html on the real default model: the saved decoding reads back against that model and is the
answer the command printed; the page holds every pass, and ``playback`` writes the same page from the file; HF
generate, which exposes no passes, is refused, and so are a file that is not there and a page that cannot be
written."""

import json

from bita.cli import generate, main
from bita.saved import read_saved

ARGS = ["generate", "--tree", "efficient:3/chain-groups", "--json", "--max-new-tokens", "20",
        "--prompt", "Name three colours."]


def test_generate_saves_the_decoding_and_its_playback_page(capsys, tmp_path, default_model, monkeypatch):
    monkeypatch.setattr(generate, "load_from", lambda args: default_model)  # loaded once for the whole test run
    saved_path, page_path = tmp_path / "decoding.json", tmp_path / "decoding.html"
    assert main([*ARGS, "--save", str(saved_path), "--html", str(page_path)]) == 0
    report = json.loads(capsys.readouterr().out)
    saved = read_saved(saved_path, default_model)  # made by these weights: no complaint
    assert report["saved"] == str(saved_path) and report["html"] == str(page_path)
    assert saved.tokens == report["tokens"] and saved.text == report["text"] and saved.method == "bita"
    assert saved.origin.adapter and saved.settings.tree == report["tree"] and len(saved.steps) == len(report["passes"])
    assert all(step.attention is not None and step.verdicts for step in saved.steps)
    page = page_path.read_text()
    assert page.count('class="bita-tok ') == len(saved.tokens) and page.count('id="bita-plotly"') == 1

    assert main(["playback", str(saved_path), "--html", str(tmp_path / "again.html")]) == 0
    assert (tmp_path / "again.html").read_text() == page and capsys.readouterr().out.strip() == saved.text.strip()

    assert main([*ARGS, "--mode", "hf", "--save", str(saved_path)]) == 2
    assert "HF generate exposes no forward passes" in capsys.readouterr().err
    assert main(["playback", str(tmp_path / "missing.json"), "--html", str(page_path)]) == 2
    assert "cannot read the saved decoding" in capsys.readouterr().err
    assert main(["playback", str(saved_path), "--html", str(tmp_path / "no-such-folder" / "page.html")]) == 2
    assert "cannot write" in capsys.readouterr().err
