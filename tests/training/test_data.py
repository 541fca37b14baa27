"""Self-generated data: tolerant ShareGPT reading, and resumable generation on the real model."""

import json
from pathlib import Path

import pytest

from bita.cli import main
from bita.errors import BitaError
from bita.model.samples import pack_samples, read_samples, unpack_samples
from bita.training.data import (
    is_heldout,
    iter_json_array,
    load_questions,
    make_data,
    prepare_prompts,
    read_done_keys,
)

REPO = Path(__file__).resolve().parents[2]
SHIPPED_DATA = REPO / "assets" / "data" / "sharegpt-smollm2"


def test_truncated_json_array_yields_the_complete_records():
    text = '[\n {"id": 1, "x": [1, 2]},\n {"id": 2},\n {"id": 3, "conversations": [{"from": "hu'
    assert [r["id"] for r in iter_json_array(text)] == [1, 2]
    assert [r["id"] for r in iter_json_array('[{"id": 1}, {"id": 2}]')] == [1, 2]


def test_questions_are_deduplicated_and_split_deterministically():
    questions = load_questions(200, seed=0)
    assert len(questions) == 200 == len({" ".join(q.lower().split()) for q in questions})
    assert questions == load_questions(200, seed=0)
    heldout = [q for q in questions if is_heldout(q, 0.1)]
    assert 0 < len(heldout) < 60


def test_make_data_resumes_after_a_half_written_line(default_model, tmp_path):
    path = tmp_path / "data.jsonl"
    make_data(default_model, path, questions=2, max_new_tokens=6, batch_size=4)
    first = read_samples(path)
    assert len(first) == 4 and {s["variant"] for s in first} == {"default", "short-system"}
    assert all(s["prompt_ids"] and s["answer_ids"] for s in first)
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:2]) + lines[2][:25])  # killed while writing the third sample
    assert len(read_done_keys(path)) == 2 and path.read_text().endswith("\n")
    make_data(default_model, path, questions=2, max_new_tokens=6, batch_size=4)
    again = read_samples(path)
    assert again[:2] == first[:2], "samples written before the interruption are kept as they were"
    # regenerated samples may be batched differently (padding), so compare what defines them
    assert sorted((s["key"], s["prompt_ids"]) for s in again) == sorted((s["key"], s["prompt_ids"]) for s in first)


def test_packed_samples_round_trip_and_filter_by_split(tmp_path):
    samples = [
        {"key": "a:default", "source": "sharegpt-first", "variant": "default", "split": "train",
         "prompt_ids": [5, 6, 7], "answer_ids": [8, 9, 2], "finish": "eos"},
        {"key": "a:turn2", "source": "sharegpt-turn2", "variant": "short-system", "split": "heldout",
         "prompt_ids": [5, 70000], "answer_ids": [11] * 4, "finish": "length"},
    ]
    pack_samples(samples, tmp_path / "packed", {"model": "m"})
    assert unpack_samples(tmp_path / "packed") == samples, "ids above 2**16 survive too"
    assert [s["key"] for s in read_samples(tmp_path / "packed", split="heldout")] == ["a:turn2"]
    manifest = json.loads((tmp_path / "packed" / "manifest.json").read_text())
    assert manifest["model"] == "m" and manifest["answer_tokens"] == 7 and manifest["counts"]["split"]["train"] == 1
    prompts_only = [{k: v for k, v in s.items() if k not in ("answer_ids", "finish")} for s in samples]
    assert unpack_samples(pack_samples(prompts_only, tmp_path / "prompts", {})) == prompts_only
    (tmp_path / "packed" / "samples.npz").write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(BitaError, match="corrupted packed data"):
        read_samples(tmp_path / "packed")


def test_the_shipped_data_is_the_default_models_own_answers(default_model):
    from bita.model.adapter import weights_fingerprint

    manifest = json.loads((SHIPPED_DATA / "manifest.json").read_text())
    assert manifest["fingerprint"] == weights_fingerprint(default_model.model)
    samples = unpack_samples(SHIPPED_DATA)
    assert len(samples) == manifest["samples"] > 30_000
    assert sum(len(s["answer_ids"]) for s in samples) == manifest["answer_tokens"]
    sample = next(s for s in samples if s["source"] == "sharegpt-turn2")
    text = default_model.tokenizer.decode(sample["prompt_ids"])
    assert text.count("<|im_start|>user") == 2 and text.count("<|im_start|>assistant") == 2


def test_second_turns_follow_the_recorded_first_exchange(default_model):
    prompts = prepare_prompts(default_model.tokenizer, 40, second_turns=True)
    by_conversation = {}
    for prompt in prompts:
        by_conversation.setdefault(prompt["key"].split(":")[0], []).append(prompt)
    second = [p for p in prompts if p["source"] == "sharegpt-turn2"]
    assert 0 < len(second) < 40
    for prompt in second:
        first = next(p for p in by_conversation[prompt["key"].split(":")[0]] if p["variant"] == "short-system")
        assert prompt["prompt_ids"][:len(first["prompt_ids"]) - 3] == first["prompt_ids"][:-3]  # same opening
        assert len({p["split"] for p in by_conversation[prompt["key"].split(":")[0]]}) == 1


def test_make_data_shards_prompts_for_parallel_runs(tmp_path, capsys):
    command = ["make-data", "--questions", "12", "--prepare-only"]
    assert main(command + ["--pack", str(tmp_path / "all")]) == 0
    assert main(command + ["--pack", str(tmp_path / "1of3"), "--shard", "1/3"]) == 0
    keys = [s["key"] for s in unpack_samples(tmp_path / "all")]
    assert len(keys) >= 24 and [s["key"] for s in unpack_samples(tmp_path / "1of3")] == keys[1::3]
    assert main(command + ["--pack", str(tmp_path / "x"), "--shard", "3/3"]) == 2
    assert "--shard must be K/N" in capsys.readouterr().err and not (tmp_path / "x").exists()
