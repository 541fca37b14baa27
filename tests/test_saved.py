"""A saved decoding: the run comes back from its file exactly, and a file that is not one, or one another model or
adapter made, is refused in one line."""

import json
from dataclasses import replace

import pytest
import torch
from saved_records import tiny_decoding, tiny_loaded

from bita.errors import BitaError
from bita.generate import RunResult
from bita.model.adapter import BitaAdapter
from bita.saved import FORMAT, check_origin, parse_saved, read_saved, saved_run


@pytest.fixture(scope="module")
def saved():
    loaded, adapter, request, run = tiny_decoding()
    return saved_run(run, loaded, request, adapter, "random-adapter")


def test_the_file_gives_back_the_run_its_settings_and_every_pass(saved, tmp_path):
    loaded, adapter, request, run = tiny_decoding()
    path = tmp_path / "decoding.json"
    path.write_text(saved.to_json())
    back = read_saved(path, loaded, adapter)  # made by this model and adapter: no complaint
    assert back.tokens == run.tokens and back.text == run.text and back.prompt_ids == request.prompt_ids
    assert back.settings.tree == "efficient:3,2,1" and back.settings.drafts == "both" and back.settings.temperature == 0
    assert back.origin == saved.origin and back.origin.adapter == "random-adapter" and back.origin.adapter_fingerprint
    assert len(back.steps) == len(run.steps) and back.steps[0].kind == "prefill"
    for mine, theirs in zip(back.steps, run.steps):
        assert torch.equal(mine.attention, theirs.attention)
        assert {**vars(mine), "attention": None} == {**vars(theirs), "attention": None}
    assert "".join(back.pieces) == loaded.tokenizer.decode(run.tokens)
    assert back.decode(back.tokens[:3]) == loaded.tokenizer.decode(run.tokens[:3])  # no tokenizer needed


def edited(saved, edit) -> str:
    found = json.loads(saved.to_json())
    edit(found)
    return json.dumps(found)


@pytest.mark.parametrize("edit,message", [
    (lambda d: d.update(format=FORMAT + 1), f"format {FORMAT + 1}, newer than this bita reads"),
    (lambda d: d.pop("format"), "not a saved decoding: it has no format number"),
    (lambda d: d.pop("tokens"), "no field 'tokens'"),
    (lambda d: d["passes"][3].pop("nodes"), "pass 3 has no field 'nodes'"),
    (lambda d: d.update(tokens=d["tokens"][:-1]), "tokens are not the 24 its passes emitted"),
    (lambda d: d["passes"][2].update(emitted=[1, 2]), "pass 2: its emitted tokens are not"),
    (lambda d: d.update(pieces=d["pieces"][1:]), "text pieces for 24 tokens"),
    (lambda d: d["vocabulary"].pop(str(d["tokens"][0])), "lacks the text of a token"),
    (lambda d: d["passes"].reverse(), "not numbered 0, 1, 2"),
    (lambda d: d["settings"].update(temperature=-1), "temperature must be"),
    (lambda d: d.update(method="hf"), "method 'hf'"),
    # hostile values: each would reach a page or a computation unchecked
    (lambda d: d["passes"][1].update(rows="<img src=x onerror=alert(1)>"), "pass 1: its field 'rows'"),
    (lambda d: d["passes"][2]["nodes"][0].update(rank="<b>1</b>"), "pass 2: its field 'nodes'"),
    (lambda d: d["passes"][2]["nodes"][0].update(prob=float("nan")), "pass 2: its field 'nodes'"),
    (lambda d: d["passes"][2]["nodes"][0].update(source="<script>"), "pass 2: a draft's source"),
    (lambda d: d["passes"][2].update(position="7"), "pass 2: its field 'position'"),
    (lambda d: d["passes"][2].update(rows=10 ** 9), "pass 2: its rows"),
    (lambda d: d["passes"][0].update(attention={"shape": [float("inf"), 1], "bits": ""}), "pass 0: its attention"),
    (lambda d: d.update(prompt_ids=[2 ** 64]), "prompt ids are not token ids"),
    (lambda d: d["origin"].update(model=["x"]), "origin, settings, text, finish or seconds"),
    (lambda d: d.update(seconds=float("inf")), "origin, settings, text, finish or seconds"),
])
def test_a_file_edited_out_of_shape_is_refused_in_one_line(saved, edit, message):
    with pytest.raises(BitaError, match=message) as refused:
        parse_saved(edited(saved, edit), "decoding.json")
    assert "\n" not in str(refused.value) and str(refused.value).startswith("decoding.json ")


@pytest.mark.parametrize("text,message", [("", "not JSON"), ('{"format": 1, "method": "bi', "not JSON"),
                                          ("[1, 2]", "not a saved decoding"),
                                          ("[" * 100_000 + "]" * 100_000, "nested too deep")])
def test_a_file_cut_short_or_not_a_decoding_is_refused(text, message):
    with pytest.raises(BitaError, match=message):
        parse_saved(text)


def test_a_decoding_another_model_or_adapter_made_is_refused(saved):
    loaded, adapter, _, _ = tiny_decoding()
    with pytest.raises(BitaError, match="made by tiny-llama-0 .* not by the loaded tiny-llama-1"):
        check_origin(saved, tiny_loaded(seed=1))
    other = BitaAdapter.create(loaded.model, prompt_tokens=4, mask_tokens=3, seed=2)
    with pytest.raises(BitaError, match="made with the adapter random-adapter"):
        check_origin(saved, loaded, other)


def test_a_run_without_forward_passes_or_a_missing_file_is_refused(tmp_path):
    loaded, adapter, request, run = tiny_decoding()
    with pytest.raises(BitaError, match="hf run exposes no forward passes"):
        saved_run(RunResult("hf", run.tokens, run.text, 1.0, "length"), loaded, request)
    with pytest.raises(BitaError, match="cannot read the saved decoding"):
        read_saved(tmp_path / "missing.json")


def test_our_ar_loops_run_saves_without_an_adapter(saved):
    loaded, _, request, run = tiny_decoding()
    ar = saved_run(replace(run, method="ar"), loaded, request)
    assert ar.origin.adapter is None and ar.settings.tree == "ar"
    assert parse_saved(ar.to_json()).origin == ar.origin
