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

from ..drafts.ngram import NgramIndex
from ..errors import BitaError
from ..model.adapter import BitaAdapter
from ..model.rank_stats import MAX_RANK, MISS, NGRAM_CHAIN, acceptance_record
from .objective import SarObjective, make_batch


@torch.no_grad()
def heldout_passes(adapter: BitaAdapter, model: nn.Module, samples: list[dict], max_rank: int = MAX_RANK,
                   max_length: int = 384) -> tuple[torch.Tensor, torch.Tensor]:
    """Per answer position whose next n+1 tokens are known (N of them), for the mask group anchored
    there: ranks [N, n] long, the rank (or MISS) of each true token among the drafts; probs
    [N, n, max_rank], the drafts' probabilities, best first; ngram [N, 2] long, the n-gram chain
    the next pass would add (``ngram_outcomes``): tokens proposed, and how many were right."""
    objective = SarObjective(adapter, model)
    device = model.get_input_embeddings().weight.device
    n = adapter.n_masks
    ranks, probs, ngram = [], [], []
    for sample in tqdm(samples, desc="draft ranks", unit="sample"):
        batch = make_batch([sample], max_length, max_length, random.Random(0), every_anchor=True)
        logits, targets, counted = objective.mask_logits(*(t.to(device) for t in (batch.input_ids, batch.lengths,
                                                                                     batch.anchors)))
        better = (logits > logits.gather(-1, targets.clamp(min=0)[..., None])).sum(-1)  # [1, G*n]
        rank = torch.where(better < max_rank, better, torch.full_like(better, MISS)).view(-1, n)
        top = torch.softmax(logits.float(), -1).topk(max_rank, -1).values.view(-1, n, max_rank)
        complete = counted.view(-1, n).all(-1).cpu()
        ranks.append(rank[complete].cpu())
        probs.append(top[complete].cpu())
        sequence = batch.input_ids[0, :batch.lengths[0]].tolist()
        ngram.append(torch.tensor(ngram_outcomes(sequence, batch.anchors[0][complete].tolist()), dtype=torch.long))
    return torch.cat(ranks), torch.cat(probs), torch.cat(ngram).view(-1, 2)


def ngram_outcomes(sequence: list[int], anchors: list[int], chain: int = NGRAM_CHAIN) -> list[tuple[int, int]]:
    """For each anchor a (ascending): the next pass's root is token a+1 and its drafts stand for
    a+2 ..; the n-gram chain (bita/drafts/ngram.py) over tokens ..a+1: (tokens proposed, how many
    of them, from the first, equal the sequence's)."""
    index, outcomes = NgramIndex(), []
    for anchor in anchors:
        index.extend(sequence[len(index.tokens):anchor + 2])
        proposal = index.propose(chain)
        truth = sequence[anchor + 2:anchor + 2 + len(proposal)]
        right = next((i for i, (a, b) in enumerate(zip(proposal, truth)) if a != b), min(len(proposal), len(truth)))
        outcomes.append((len(proposal), right))
    return outcomes


def calibrate(adapter: BitaAdapter, model: nn.Module, samples: list[dict], max_rank: int = MAX_RANK) -> dict:
    """Score ``samples`` and store the statistics in ``adapter.config.acceptance``."""
    if not samples:
        raise BitaError("calibration needs held-out samples")
    adapter.config.acceptance = acceptance_record(*heldout_passes(adapter, model, samples, max_rank), max_rank,
                                                  len(samples))
    return adapter.config.acceptance
