"""Bi-directional tuning on a tiny model: the SAR loss falls, only adapter parameters move,
and an interrupted run resumes to the same result."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import random_prompts, tiny_model

import bita.training.train
from bita.decode.hf_reference import hf_generate
from bita.drafts.tree import parse_tree_spec
from bita.errors import BitaError
from bita.model.adapter import BitaAdapter
from bita.model.rank_stats import SAMPLE_RANKS, stored_ranks
from bita.model.samples import read_samples
from bita.model.target_stats import TARGET_DEPTHS, TARGET_PASSES
from bita.plan.acceptance import forecast
from bita.plan.dynamic_plan import dynamic_shape, forecast_passes, stored_passes, stored_reliability
from bita.training.objective import SarObjective, make_batch
from bita.training.train import TrainConfig, train


def write_self_generated(model, path, count=24, learnable=False):
    """The model's own greedy answers; ``learnable`` swaps in answers that repeat one token, a
    target that a ~700-parameter adapter on a random model can actually fit."""
    with path.open("w") as sink:
        for i, prompt in enumerate(random_prompts(count, seed=41, low=4, high=12)):
            answer = [42] * 30 if learnable else hf_generate(model, prompt, 40, [])
            split = "heldout" if i % 6 == 0 else "train"
            sink.write(json.dumps({"key": str(i), "split": split, "prompt_ids": prompt, "answer_ids": answer}) + "\n")


def config_for(tmp_path, **overrides):
    values = dict(data=str(tmp_path / "data.jsonl"), output=str(tmp_path / "adapter"), prompt_tokens=4,
                  mask_tokens=3, steps=40, batch_size=4, lr=3e-2, warmup=2, anchors=16, max_length=64,
                  eval_every=40, eval_samples=8, checkpoint_every=10)
    return TrainConfig(**{**values, **overrides})


def test_make_batch_places_anchors_in_the_answer():
    samples = [{"prompt_ids": [5, 6, 7], "answer_ids": [8, 9, 10, 11]}, {"prompt_ids": [5], "answer_ids": [8, 9]}]
    batch = make_batch(samples, n_anchors=8, max_length=64, rng=None, every_anchor=True)
    assert batch.input_ids.tolist() == [[5, 6, 7, 8, 9, 10, 11], [5, 8, 9, 0, 0, 0, 0]]
    assert batch.lengths.tolist() == [7, 3]
    assert batch.anchors.tolist() == [[2, 3, 4] + [-1] * 5, [0] + [-1] * 7]


@pytest.mark.parametrize("prompt_style", ["deep", "shallow"])
def test_training_lowers_the_loss_and_touches_only_the_adapter(tmp_path, prompt_style):
    model = tiny_model("llama")
    before = {k: v.clone() for k, v in model.state_dict().items()}
    write_self_generated(model, tmp_path / "data.jsonl", learnable=True)
    adapter = train(model, "tiny-llama", config_for(tmp_path, prompt_style=prompt_style))
    log = [json.loads(line) for line in (tmp_path / "adapter.run" / "log.jsonl").read_text().splitlines()]
    first, last = sum(r["loss"] for r in log[:5]) / 5, sum(r["loss"] for r in log[-5:]) / 5
    assert last < 0.2 * first, (first, last)
    assert min(log[-1]["heldout_top1"]) > 0.9
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items()), "base model must stay frozen"
    saved = BitaAdapter.load(tmp_path / "adapter", model)
    assert saved.config.training["steps"] == 40 and len(saved.config.training["heldout_top1_per_depth"]) == 3
    assert saved.config.acceptance["samples"] == 4 and saved.config.acceptance["passes"] > 50
    # the learnt drafts are right at every depth, so a 3-deep chain is forecast to emit ~4 tokens a pass
    assert forecast(parse_tree_spec("chain:3"), stored_ranks(saved)).tokens_per_pass > 3.5
    # and what dynamic trees need: sure drafts score high, and the sampled passes forecast the same
    assert stored_reliability(saved).scores([[0.99]])[0][0] > 0.9
    passes = stored_passes(saved)
    assert len(passes) == min(saved.config.acceptance["passes"], 1500) and all(len(p.probs) == 3 for p in passes)
    assert forecast_passes(dynamic_shape(saved, 16), passes).tokens_per_pass > 3.5
    # and what sampled forecasts need: the target's distribution at every depth of the first passes
    targets = [p.targets for p in passes if p.targets]
    assert len(targets) == min(len(passes), TARGET_PASSES) and all(len(t) <= TARGET_DEPTHS for t in targets)
    assert all(len(d.drafts) == (SAMPLE_RANKS if i < 3 else 0) for t in targets for i, d in enumerate(t))
    assert torch.equal(saved.mask_embeddings, adapter.mask_embeddings.detach())
    # the corpus chain over the training answers (all 42s): calibrated right far at a long match
    rates = saved.config.acceptance["corpus"]["rates"]
    assert all(p.corpus is not None for p in passes) and max(row[3] for row in rates) > 0.9


def test_training_under_bf16_autocast_learns_and_keeps_fp32_parameters(tmp_path):
    """--mixed-precision bf16: the frozen model's passes in bf16 under autocast (where a CPU has bf16
    hardware, its linears run 2.9-3.1x faster: issue 38), the adapter's parameters and loss in fp32."""
    model = tiny_model("llama")
    write_self_generated(model, tmp_path / "data.jsonl", learnable=True)
    adapter = train(model, "tiny-llama", config_for(tmp_path, mixed_precision="bf16"))
    log = [json.loads(line) for line in (tmp_path / "adapter.run" / "log.jsonl").read_text().splitlines()]
    assert sum(r["loss"] for r in log[-5:]) < 0.2 * sum(r["loss"] for r in log[:5])
    assert adapter.mask_embeddings.dtype == torch.float32 and model.dtype == torch.float32


def test_interrupted_training_resumes_to_the_same_adapter(tmp_path, monkeypatch):
    model = tiny_model("qwen2")
    write_self_generated(model, tmp_path / "data.jsonl")
    straight = train(model, "tiny", config_for(tmp_path, steps=20, output=str(tmp_path / "straight")))
    save_checkpoint = bita.training.train._save_checkpoint

    def save_then_die(accelerator, run_dir, step, seconds):
        save_checkpoint(accelerator, run_dir, step, seconds)
        if step == 10:
            raise KeyboardInterrupt  # killed right after the step-10 checkpoint

    monkeypatch.setattr(bita.training.train, "_save_checkpoint", save_then_die)
    resumed_config = config_for(tmp_path, steps=20, output=str(tmp_path / "resumed"))
    with pytest.raises(KeyboardInterrupt):
        train(model, "tiny", resumed_config)
    monkeypatch.undo()
    resumed = train(model, "tiny", resumed_config)
    for a, b in zip(straight.parameters(), resumed.parameters()):
        torch.testing.assert_close(a, b)
    # the data are the model's own greedy answers, so at every stored depth the answer's token is the
    # target's likeliest
    depths = [d for p in stored_passes(BitaAdapter.load(tmp_path / "straight", model)) for d in p.targets or []]
    assert depths and all(d.answer == 0 for d in depths)


def test_two_cpu_processes_train_together(tmp_path, default_model):
    """torchrun with two CPU processes: accelerate joins them over gloo and records both."""
    model = tiny_model("llama")
    model.save_pretrained(tmp_path / "tiny")
    default_model.tokenizer.save_pretrained(tmp_path / "tiny")  # any tokenizer: training reads token ids
    write_self_generated(model, tmp_path / "data.jsonl", learnable=True)
    settings = dict(steps=6, batch_size=2, anchors=8, max_length=64, eval_every=6, eval_samples=4,
                    checkpoint_every=3, prompt_tokens=4)
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
               "-m", "bita", "train", "--model", str(tmp_path / "tiny"), "--data", str(tmp_path / "data.jsonl"),
               "--output", str(tmp_path / "adapter")]
    command += [f"--{k.replace('_', '-')}={v}" for k, v in settings.items()]
    done = subprocess.run(command, cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True,
                          timeout=600, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    training = BitaAdapter.load(tmp_path / "adapter", model).config.training
    assert training["processes"] == 2 and training["steps"] == 6
    log = (tmp_path / "adapter.run" / "log.jsonl").read_text().splitlines()
    assert len(log) == 6, "only the main process writes the log"


def test_a_reparameterised_prompt_trains_and_folds_into_the_same_plain_adapter(tmp_path):
    model = tiny_model("mistral")
    write_self_generated(model, tmp_path / "data.jsonl", learnable=True)
    adapter = train(model, "tiny", config_for(tmp_path, steps=6, prompt_reparam=32, eval_every=6))
    assert adapter.config.prompt_reparam == 0 and not hasattr(adapter, "prompt_mlp"), "inference sees plain key/values"
    saved = BitaAdapter.load(tmp_path / "adapter", model)
    assert saved.config.training["prompt_reparam"] == 32
    reparam = BitaAdapter.create(model, prompt_tokens=4, prompt_reparam=32, seed=3)
    batch = make_batch(read_samples(tmp_path / "data.jsonl", "train")[:2], 8, 64, None, every_anchor=True)
    losses = [SarObjective(a, model)(batch.input_ids, batch.lengths, batch.anchors)[0] for a in (reparam,
                                                                                               reparam.folded())]
    torch.testing.assert_close(losses[0], losses[1])


def test_a_run_out_of_time_saves_a_usable_adapter_and_resumes(tmp_path):
    model = tiny_model("llama")
    write_self_generated(model, tmp_path / "data.jsonl", learnable=True)
    stopped = train(model, "tiny", config_for(tmp_path, steps=12, max_seconds=1e-9))
    assert stopped.config.training["steps_done"] == 1 and len(stopped.config.training["heldout_top1_per_depth"]) == 3
    assert BitaAdapter.load(tmp_path / "adapter", model).config.acceptance["samples"] == 4
    finished = train(model, "tiny", config_for(tmp_path, steps=12))
    assert finished.config.training["steps_done"] == 12
    log = [json.loads(line) for line in (tmp_path / "adapter.run" / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == list(range(1, 13)), "the second run went on from the first's checkpoint"


def test_a_run_starts_from_a_trained_adapter_with_soft_targets_and_depth_weights(tmp_path):
    model = tiny_model("llama")
    write_self_generated(model, tmp_path / "data.jsonl", learnable=True)
    first = train(model, "tiny", config_for(tmp_path, steps=40))
    again = config_for(tmp_path, steps=2, lr=1e-9, output=str(tmp_path / "again"), init_from=str(tmp_path / "adapter"),
                       soft_weight=0.5, depth_weights="1,0.5,0.25")
    continued = train(model, "tiny", again)  # a negligible step size: it starts where the first ended
    assert torch.allclose(continued.mask_embeddings, first.mask_embeddings, atol=1e-6)
    assert min(continued.config.training["heldout_top1_per_depth"]) > 0.9
    assert continued.config.training["soft_weight"] == 0.5
    with pytest.raises(BitaError, match="cannot start from"):
        train(model, "tiny", config_for(tmp_path, steps=2, prompt_tokens=5, output=str(tmp_path / "other"),
                                        init_from=str(tmp_path / "adapter")))


def test_target_rows_of_an_answer_without_a_complete_anchor():
    """A sampled answer that stops at once leaves no anchor with all its depths: nothing to store
    (Gemma 3's base-model answers hit this)."""
    from bita.training.calibration import target_rows

    model = tiny_model("llama")
    rows = target_rows(model, torch.zeros(5, 64), torch.tensor([3, 4, 5, 6, 7]), [],
                       torch.zeros(0, 3, 2, dtype=torch.long))
    assert all(len(value) == 0 for value in rows.values())
