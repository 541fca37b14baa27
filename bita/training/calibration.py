"""Draft-rank statistics of an adapter, from held-out self-generated data (teacher forced).

Greedy decoding reproduces the data's answers, so the mask group anchored at answer position
t sees exactly what it sees in a decoding pass whose last accepted token sits at t. Scoring
every anchor therefore gives, per would-be pass, the rank of each true future token among the
drafts: what ``bita.plan.acceptance.forecast`` needs to predict any tree's tokens per pass without
decoding. The statistics are stored in the adapter config under ``acceptance`` (bita/model/rank_stats.py).
"""

from __future__ import annotations

import random

import torch
from torch import nn
from tqdm import tqdm

from ..errors import BitaError
from ..model.adapter import BitaAdapter
from ..model.rank_stats import MAX_RANK, MISS, acceptance_record
from .objective import SarObjective, make_batch


@torch.no_grad()
def heldout_ranks(adapter: BitaAdapter, model: nn.Module, samples: list[dict], max_rank: int = MAX_RANK,
                  max_length: int = 384) -> list[tuple[int, ...]]:
    """Per answer position whose next n+1 tokens are known: rank (or MISS) of each true token
    among the drafts of the mask group anchored there."""
    objective = SarObjective(adapter, model)
    device = model.get_input_embeddings().weight.device
    n = adapter.n_masks
    ranks: list[tuple[int, ...]] = []
    for sample in tqdm(samples, desc="draft ranks", unit="sample"):
        batch = make_batch([sample], max_length, max_length, random.Random(0), every_anchor=True)
        logits, targets, counted = objective.mask_logits(*(t.to(device) for t in (batch.input_ids, batch.lengths,
                                                                                     batch.anchors)))
        better = (logits > logits.gather(-1, targets.clamp(min=0)[..., None])).sum(-1)  # [1, G*n]
        rank = torch.where(better < max_rank, better, torch.full_like(better, MISS)).view(-1, n)
        complete = counted.view(-1, n).all(-1)
        ranks += [tuple(r) for r in rank[complete].tolist()]
    return ranks


def calibrate(adapter: BitaAdapter, model: nn.Module, samples: list[dict], max_rank: int = MAX_RANK) -> dict:
    """Score ``samples`` and store the statistics in ``adapter.config.acceptance``."""
    if not samples:
        raise BitaError("calibration needs held-out samples")
    adapter.config.acceptance = acceptance_record(heldout_ranks(adapter, model, samples, max_rank), max_rank,
                                                  len(samples))
    return adapter.config.acceptance
