"""Bi-directional tuning: train prompt and mask parameters with the SAR loss, base model frozen.

The objective lives in ``objective.py``. Runs under accelerate: ``python -m bita train`` on
CPU or one GPU; ``torchrun`` or ``accelerate launch`` for several processes. Checkpoints every
few steps and resumes from the last one. At the end, the adapter's draft-rank statistics are
measured on the held-out samples (``calibration.py``) and saved with it.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch import nn
from tqdm import tqdm
from transformers import get_cosine_schedule_with_warmup

from ..drafts.corpus import CorpusIndex
from ..errors import BitaError
from ..model.adapter import BitaAdapter
from ..model.samples import read_samples
from ..runtime.device import describe_device, device_of
from .calibration import calibrate
from .objective import SarObjective, make_batch


@dataclass
class TrainConfig:
    data: str = "data/self_generated.jsonl"
    output: str = "runs/adapter"
    prompt_tokens: int = 16
    prompt_style: str = "deep"  # "deep" (per-layer key/values) or "shallow" (input embeddings)
    prompt_reparam: int = 0  # hidden width of prefix-tuning's prompt MLP while training (folded after); 0 = off
    mask_tokens: int = 3
    steps: int = 400
    batch_size: int = 4
    lr: float = 3e-2
    warmup: int = 20
    anchors: int = 64  # mask groups per sample (at most every answer position: 190 covers 192-token answers)
    soft_weight: float = 0.0  # share of the loss that is KL from the frozen model's distribution (0: cross-entropy)
    depth_weights: str = ""  # comma list, one weight per mask depth (empty: equal)
    init_from: str = ""  # an adapter directory to start from (its shape must be this config's); "": fresh
    max_length: int = 384
    eval_every: int = 100
    eval_samples: int = 48
    train_samples: int = 0  # use only the first N training samples (for data-size curves); 0 = all
    checkpoint_every: int = 25
    max_seconds: float = 0.0  # stop this run (checkpointed, adapter saved) after this much training time; 0 = none
    seed: int = 0
    mixed_precision: str = "no"  # "bf16": the passes under autocast (the adapter's parameters stay fp32); "no"


def autocast(config: TrainConfig, device: torch.device) -> torch.autocast:
    """The passes' precision: bf16 under autocast with ``mixed_precision`` "bf16" (the adapter's parameters
    and the optimiser stay fp32), else as the model's weights are."""
    if config.mixed_precision not in ("no", "bf16"):
        raise BitaError(f"mixed_precision must be 'no' or 'bf16', not {config.mixed_precision!r}")
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=config.mixed_precision == "bf16")


def evaluate(objective: nn.Module, heldout: list[dict], config: TrainConfig, device) -> list[float]:
    """Top-1 accuracy of each mask depth on held-out samples (every anchor up to the cap)."""
    hits = counted = 0
    with torch.no_grad():
        for start in range(0, len(heldout), config.batch_size):
            batch = make_batch(heldout[start:start + config.batch_size], config.anchors, config.max_length,
                               random.Random(0), every_anchor=True)
            with autocast(config, device):
                _, h, c = objective(batch.input_ids.to(device), batch.lengths.to(device), batch.anchors.to(device))
            hits, counted = hits + h, counted + c
    return (hits / counted.clamp(min=1)).tolist() if heldout else []


def depth_weights(config: TrainConfig) -> tuple[float, ...]:
    """``config.depth_weights`` as numbers, one per mask depth (BitaError otherwise); () for equal."""
    if not config.depth_weights:
        return ()
    try:
        weights = tuple(float(w) for w in config.depth_weights.split(","))
    except ValueError:
        weights = ()
    if len(weights) != config.mask_tokens or min(weights) < 0 or not any(weights):
        raise BitaError(f"depth_weights must be {config.mask_tokens} non-negative numbers, not all 0, "
                        f"e.g. '1,0.5,0.25': not {config.depth_weights!r}")
    return weights


def split_samples(config: TrainConfig) -> tuple[list[dict], list[dict]]:
    """The usable samples of ``config.data``: the training set (first ``train_samples``, 0 = all)
    and the held-out set (first ``eval_samples``)."""
    samples = read_samples(Path(config.data))
    usable = [s for s in samples if len(s["answer_ids"]) >= 2 and len(s["prompt_ids"]) < config.max_length - 2]
    train_set = [s for s in usable if s["split"] == "train"][: config.train_samples or None]
    return train_set, [s for s in usable if s["split"] == "heldout"][: config.eval_samples]


def _save_checkpoint(accelerator, run_dir: Path, step: int, seconds: float) -> None:
    """Write the accelerate state next to the old checkpoint, then swap it in. ``seconds``:
    training time so far, summed over resumed runs."""
    staging, final = run_dir / "checkpoint.tmp", run_dir / "checkpoint"
    accelerator.save_state(str(staging))
    accelerator.wait_for_everyone()  # every process has written its random state
    if accelerator.is_main_process:
        (staging / "step.json").write_text(json.dumps({"step": step, "seconds": seconds}))
        shutil.rmtree(final, ignore_errors=True)
        os.replace(staging, final)
    accelerator.wait_for_everyone()


def train(model: nn.Module, model_name: str, config: TrainConfig) -> BitaAdapter:
    """Train an adapter for ``model`` (resumable, see ``TrainConfig``). On CUDA its matmuls run in TF32
    (the adapter's training precision only): the process's setting comes back afterwards, so
    decoding in the same process stays fp32."""
    previous = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = previous or device_of(model).type == "cuda"
    try:
        return train_adapter(model, model_name, config)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous


def start_from(adapter: BitaAdapter, trained: BitaAdapter, where: str) -> None:
    """Copy ``trained``'s weights into the fresh ``adapter`` (BitaError where their shapes differ)."""
    shapes = lambda a: {k: tuple(v.shape) for k, v in a.state_dict().items()}  # noqa: E731
    if shapes(adapter) != shapes(trained):
        raise BitaError(f"cannot start from {where}: its parameters {shapes(trained)} are not this run's "
                        f"{shapes(adapter)} (prompt tokens, masks, prompt style and reparameterisation must match)")
    adapter.load_state_dict(trained.state_dict())


def train_adapter(model: nn.Module, model_name: str, config: TrainConfig) -> BitaAdapter:
    from accelerate import Accelerator

    # cpu=True lets a multi-process launch on a CPU-only machine use gloo (MULTI_CPU).
    accelerator = Accelerator(cpu=device_of(model).type == "cpu")
    device = accelerator.device
    model.to(device)
    train_set, heldout = split_samples(config)
    if not train_set:
        raise BitaError(f"{config.data!r} holds no usable training samples")
    adapter = BitaAdapter.create(model, config.prompt_tokens, config.mask_tokens, config.seed, model_name,
                                 config.prompt_style, config.prompt_reparam)
    if config.init_from:
        start_from(adapter, BitaAdapter.load(config.init_from, model), config.init_from)
    objective = SarObjective(adapter, model, config.soft_weight, depth_weights(config))
    optimizer = torch.optim.AdamW(adapter.parameters(), lr=config.lr, weight_decay=0.0)
    scheduler = get_cosine_schedule_with_warmup(optimizer, config.warmup, config.steps)
    objective, optimizer = accelerator.prepare(objective, optimizer)
    accelerator.register_for_checkpointing(scheduler)

    run_dir = Path(config.output).with_suffix(".run")
    start, seconds_before = 0, 0.0
    if (run_dir / "checkpoint" / "step.json").is_file():
        accelerator.load_state(str(run_dir / "checkpoint"))
        progress = json.loads((run_dir / "checkpoint" / "step.json").read_text())
        start, seconds_before = progress["step"], progress.get("seconds", 0.0)
        accelerator.print(f"resuming from step {start} ({run_dir / 'checkpoint'})")
    run_dir.mkdir(parents=True, exist_ok=True)
    log = (run_dir / "log.jsonl").open("a") if accelerator.is_main_process else None
    started = time.perf_counter()
    bar = tqdm(range(start, config.steps), initial=start, total=config.steps, desc="bi-directional tuning",
               disable=not accelerator.is_local_main_process)
    accuracy, loss_value, done = [], float("nan"), start
    for step in bar:
        rng = random.Random(f"{config.seed}:{step}:{accelerator.process_index}")  # stateless: resumes exactly
        batch = make_batch(rng.sample(train_set, min(config.batch_size, len(train_set))), config.anchors,
                           config.max_length, rng)
        with autocast(config, device):
            loss, hits, counted = objective(batch.input_ids.to(device), batch.lengths.to(device),
                                            batch.anchors.to(device))
        accelerator.backward(loss)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
        loss_value = accelerator.gather(loss.detach()[None]).mean().item()
        record = {"step": step + 1, "loss": loss_value, "lr": scheduler.get_last_lr()[0],
                  "train_top1": (hits / counted.clamp(min=1)).tolist()}
        out_of_time = bool(config.max_seconds) and bool(accelerator.reduce(  # every process stops at the same step
            torch.tensor(float(time.perf_counter() - started > config.max_seconds), device=device), "max"))
        done = step + 1
        if done % config.eval_every == 0 or done == config.steps or out_of_time:
            accuracy = evaluate(objective, heldout, config, device)
            record["heldout_top1"] = accuracy
        bar.set_postfix(loss=f"{loss_value:.3f}", top1=",".join(f"{a:.2f}" for a in record["train_top1"]))
        if log:
            log.write(json.dumps(record) + "\n")
            log.flush()
        if done % config.checkpoint_every == 0 or out_of_time:
            _save_checkpoint(accelerator, run_dir, step + 1, seconds_before + time.perf_counter() - started)
        if out_of_time:
            accelerator.print(f"stopping at step {step + 1} of {config.steps} (--max-seconds); rerun to resume")
            break
    trained = accelerator.unwrap_model(objective).adapter.folded()
    trained.config.training = {
        **asdict(config), "train_samples": len(train_set), "heldout_samples": len(heldout),
        "final_loss": loss_value, "heldout_top1_per_depth": accuracy, "steps_done": done,
        "processes": accelerator.num_processes,
        "train_answer_tokens": sum(len(s["answer_ids"]) for s in train_set),
        "hardware": describe_device(device), "seconds": round(seconds_before + time.perf_counter() - started, 1),
    }
    if accelerator.is_main_process:
        if heldout:  # the corpus chain's index: the answers trained on (decoding's also leaves out leaks.json's)
            calibrate(trained, model, heldout, corpus=CorpusIndex.build([s["answer_ids"] for s in train_set]))
        trained.save(config.output)
    accelerator.wait_for_everyone()
    return trained
