"""bita.show: a run, a saved decoding or its file as the playback page, inline in a notebook (an iframe of its
own; nbclient and ipykernel are not installed here, so ``_repr_html_`` is what is checked)."""

import html
import re

import pytest
from saved_records import tiny_decoding, tiny_loaded

import bita
from bita.errors import BitaError
from bita.saved import saved_run
from viz.playback import playback_html


def test_a_run_a_saved_decoding_and_its_file_show_the_same_page(tmp_path):
    loaded, adapter, request, run = tiny_decoding()
    saved = saved_run(run, loaded, request, adapter, "random-adapter")
    path = tmp_path / "decoding.json"
    path.write_text(saved.to_json())
    page = playback_html(saved)
    shown = [bita.show(run, loaded, request, adapter, "random-adapter"), bita.show(saved), bita.show(path, loaded),
             bita.show(str(path))]
    assert all(playback.html == page for playback in shown)
    inline = shown[0]._repr_html_()
    srcdoc = re.fullmatch(r'<iframe srcdoc="([^"]*)" style="[^"]*" title="[^"]*"></iframe>', inline).group(1)
    assert html.unescape(srcdoc) == page
    assert shown[0].save(tmp_path / "decoding.html").read_text() == page


def test_what_cannot_be_shown_is_refused_in_one_line(tmp_path):
    loaded, adapter, request, run = tiny_decoding()
    with pytest.raises(BitaError, match="with the model that decoded it and its request"):
        bita.show(run)
    with pytest.raises(BitaError, match="not 42"):
        bita.show(42)
    path = tmp_path / "decoding.json"
    path.write_text(saved_run(run, loaded, request, adapter).to_json())
    with pytest.raises(BitaError, match="not by the loaded tiny-llama-1"):
        bita.show(path, tiny_loaded(seed=1))
