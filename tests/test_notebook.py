"""bita.show: a run, a saved decoding or its file as the playback page, inline in a notebook (an iframe of its
own: ``_repr_html_``, and a real notebook run on a real kernel by nbclient shows it); two of them side by side as
the same page ``playback_html`` makes of the pair."""

import html
import re
from pathlib import Path

import pytest
from saved_records import tiny_ar_decoding, tiny_decoding, tiny_loaded

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
    shown = [bita.show(run, loaded=loaded, request=request, adapter=adapter, adapter_name="random-adapter"),
             bita.show(saved), bita.show(path, loaded=loaded), bita.show(str(path))]
    assert all(playback.html == page for playback in shown)
    inline = shown[0]._repr_html_()
    # sandboxed: the page's scripts run without an origin, apart from the notebook's page and kernel
    srcdoc = re.fullmatch(r'<iframe sandbox="allow-scripts" srcdoc="([^"]*)" style="[^"]*" title="[^"]*"></iframe>',
                          inline).group(1)
    assert html.unescape(srcdoc) == page
    assert shown[0].save(tmp_path / "decoding.html").read_text() == page


def test_two_runs_show_side_by_side(tmp_path):
    loaded, adapter, request, run = tiny_decoding()
    ar_run = tiny_ar_decoding()
    saved, ar = saved_run(run, loaded, request, adapter, "random-adapter"), saved_run(ar_run, loaded, request)
    path = tmp_path / "ar.json"
    path.write_text(ar.to_json())
    shown = bita.show(run, ar_run, loaded=loaded, request=request, adapter=adapter, adapter_name="random-adapter")
    assert shown.html == playback_html(saved, ar) == bita.show(saved, path).html


def test_what_cannot_be_shown_is_refused_in_one_line(tmp_path):
    loaded, adapter, request, run = tiny_decoding()
    with pytest.raises(BitaError, match="with the model that decoded it and its request"):
        bita.show(run)
    with pytest.raises(BitaError, match="not int"):
        bita.show(42)
    saved = saved_run(run, loaded, request, adapter)
    with pytest.raises(BitaError, match="by name: loaded=.* not LoadedModel"):
        bita.show(saved, loaded)  # the model passed where a second decoding goes
    path = tmp_path / "decoding.json"
    path.write_text(saved.to_json())
    with pytest.raises(BitaError, match="not by the loaded tiny-llama-1"):
        bita.show(path, loaded=tiny_loaded(seed=1))


def test_a_notebook_run_on_a_kernel_shows_the_page_inline(tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    loaded, adapter, request, run = tiny_decoding()
    path = tmp_path / "decoding.json"
    path.write_text(saved_run(run, loaded, request, adapter, "random-adapter").to_json())
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(f"import bita\nbita.show({str(path)!r})")])
    repo = Path(__file__).resolve().parents[1]
    nbclient.NotebookClient(notebook, timeout=120, kernel_name="python3",
                            resources={"metadata": {"path": str(repo)}}).execute()
    outputs = notebook.cells[0].outputs
    shown = [output["data"]["text/html"] for output in outputs if "text/html" in output.get("data", {})]
    assert shown == [bita.show(path)._repr_html_()]
