"""generate --save and --html on the real default model: the saved decoding reads back against that model and is the
answer the command printed; the page holds every pass, and ``playback`` writes the same page from the file; HF
generate, which exposes no passes, is refused, and so are a file that is not there and a page that cannot be
written. With --mode both the page plays BiTA beside our AR loop, and ``playback A B`` pairs two saved files."""

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


def test_both_modes_page_plays_bita_beside_our_ar_loop(capsys, tmp_path, default_model, monkeypatch):
    monkeypatch.setattr(generate, "load_from", lambda args: default_model)
    bita_path, ar_path, page_path = tmp_path / "bita.json", tmp_path / "ar.json", tmp_path / "both.html"
    assert main([*ARGS, "--mode", "both", "--save", str(bita_path), "--html", str(page_path)]) == 0
    report = json.loads(capsys.readouterr().out)
    page = page_path.read_text()
    assert read_saved(bita_path).method == "bita" and report["identical_to_ar"]
    assert page.count('class="bita-pane"') == 2 and page.count('id="bita-plotly"') == 1
    assert page.count('class="bita-tok ') == 2 * report["new_tokens"]  # the same answer twice, greedy

    assert main([*ARGS, "--mode", "ar", "--save", str(ar_path)]) == 0
    ar_passes = len(json.loads(capsys.readouterr().out)["passes"])
    assert main(["playback", str(bita_path), str(ar_path), "--html", str(tmp_path / "pair.html")]) == 0
    printed = capsys.readouterr().err  # the text on stdout, the details on stderr
    assert f"forward_passes={report['forward_passes']}" in printed and f"beside_forward_passes={ar_passes}" in printed
    assert (tmp_path / "pair.html").read_text().count('class="bita-pane"') == 2
