"""Draft-rank statistics of an adapter, from held-out self-generated data (teacher forced).

Greedy decoding reproduces the data's answers, so the mask group anchored at answer position
t sees exactly what it sees in a decoding pass whose last accepted token sits at t. Scoring
every anchor therefore gives, per would-be pass, the rank of each true future token among the
drafts: what ``bita.plan.acceptance.forecast`` needs to predict any tree's tokens per pass without
decoding. The statistics are stored in the adapter config under ``acceptance`` (bita/model/rank_stats.py).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch
from torch import nn
from tqdm import tqdm

from ..decode.verify import shared_prefix
from ..drafts.corpus import CorpusIndex
from ..drafts.ngram import NgramIndex
from ..errors import BitaError
from ..model.adapter import BitaAdapter
from ..model.rank_stats import MAX_RANK, MISS, NGRAM_CHAIN, SAMPLE_RANKS, acceptance_record, pass_sample_record
from ..model.target_stats import TARGET_DEPTHS, TARGET_PASSES, target_summaries
from ..runtime.device import output_logits
from .objective import SarObjective, make_batch


@dataclass
class HeldoutPasses:
    """Per answer position whose next n+1 tokens are known (N of them), for the mask group anchored
    there: ranks [N, n] long, the rank (or MISS) of each true token among the drafts; probs
    [N, n, max_rank], the drafts' probabilities, best first; chains [N, 5] long, the chains the next
    pass would add (``chain_outcomes``, rank_stats.CHAIN_COLUMNS): tokens proposed and right of the
    n-gram chain and of the corpus chain, and the corpus match's length (-1: no corpus); targets:
    the target model's distribution at depths 1..TARGET_DEPTHS (target_stats.target_summaries'
    tensors, with ``answered`` [N, TARGET_DEPTHS] bool: the answer has a token at that depth)."""

    ranks: torch.Tensor
    probs: torch.Tensor
    chains: torch.Tensor
    targets: dict[str, torch.Tensor]


@torch.no_grad()
def heldout_passes(adapter: BitaAdapter, model: nn.Module, samples: list[dict], max_rank: int = MAX_RANK,
                   max_length: int = 384, corpus: CorpusIndex | None = None) -> HeldoutPasses:
    """Score every anchor of ``samples`` (teacher forced), with the corpus chain of ``corpus`` (an
    index that must not hold these answers): see HeldoutPasses."""
    objective = SarObjective(adapter, model)
    device = model.get_input_embeddings().weight.device
    n = adapter.n_masks
    ranks, probs, chains, targets = [], [], [], []
    for sample in tqdm(samples, desc="draft ranks", unit="sample"):
        batch = make_batch([sample], max_length, max_length, random.Random(0), every_anchor=True)
        input_ids = batch.input_ids.to(device)
        logits, targets_, counted, hidden = objective.mask_logits(input_ids, batch.lengths.to(device),
                                                                  batch.anchors.to(device))
        better = (logits > logits.gather(-1, targets_.clamp(min=0)[..., None])).sum(-1)  # [1, G*n]
        rank = torch.where(better < max_rank, better, torch.full_like(better, MISS)).view(-1, n)
        top = torch.softmax(logits.float(), -1).topk(max_rank, -1)
        complete = counted.view(-1, n).all(-1).cpu()
        ranks.append(rank[complete].cpu())
        probs.append(top.values.view(-1, n, max_rank)[complete].cpu())
        sequence = batch.input_ids[0, :batch.lengths[0]].tolist()
        anchors = batch.anchors[0][complete].tolist()
        chains.append(torch.tensor(chain_outcomes(sequence, anchors, corpus), dtype=torch.long).view(-1, 5))
        drafts = top.indices.view(-1, n, max_rank)[complete][..., :SAMPLE_RANKS].cpu()
        targets.append(target_rows(model, hidden[0], batch.input_ids[0, :len(sequence)], anchors, drafts))
    return HeldoutPasses(torch.cat(ranks), torch.cat(probs), torch.cat(chains),
                         {key: torch.cat([t[key] for t in targets]) for key in targets[0]})


def target_rows(model: nn.Module, hidden: torch.Tensor, sequence: torch.Tensor, anchors: list[int],
                drafts: torch.Tensor) -> dict:
    """The target's distribution at depths 1..TARGET_DEPTHS past each anchor a (the row at a + d predicts
    token a + 1 + d, depth d's): hidden [>= T, H], the frozen model's hidden states over sequence [T]
    (CPU); drafts [N, n, R] (the mask drafts' token ids)."""
    rows = torch.tensor(anchors, dtype=torch.long)[:, None] + torch.arange(1, TARGET_DEPTHS + 1)  # [N, D]
    answered = rows + 1 < len(sequence)
    logits = output_logits(model, hidden[rows.clamp(max=len(sequence) - 1).to(hidden.device)]).cpu()
    depths = torch.full((len(anchors), TARGET_DEPTHS, drafts.shape[2]), -1, dtype=torch.long)
    drafted = min(TARGET_DEPTHS, drafts.shape[1])
    depths[:, :drafted] = drafts[:, :drafted]
    answers = torch.where(answered, sequence[(rows + 1).clamp(max=len(sequence) - 1)], -1)
    return {**target_summaries(logits, depths, answers), "answered": answered}


def chain_outcomes(sequence: list[int], anchors: list[int], corpus: CorpusIndex | None = None,
                   chain: int = NGRAM_CHAIN) -> list[tuple[int, int, int, int, int]]:
    """For each anchor a (ascending): the next pass's root is token a+1 and its drafts stand for
    a+2 ..; the n-gram chain (bita/drafts/ngram.py) over tokens ..a+1 and the corpus chain
    (bita/drafts/corpus.py) continuing them: (n-gram tokens proposed, how many of them, from the first,
    equal the sequence's, the same two of the corpus chain, its match length; 0, 0, -1 without a corpus)."""
    index, outcomes = NgramIndex(), []
    for anchor in anchors:
        index.extend(sequence[len(index.tokens):anchor + 2])
        truth = sequence[anchor + 2:anchor + 2 + chain]
        proposal = index.propose(chain)
        found, match = corpus.propose(index.tokens, chain) if corpus is not None else ([], -1)
        outcomes.append((len(proposal), shared_prefix(proposal, truth), len(found), shared_prefix(found, truth), match))
    return outcomes


def calibrate(adapter: BitaAdapter, model: nn.Module, samples: list[dict], max_rank: int = MAX_RANK,
              corpus: CorpusIndex | None = None) -> dict:
    """Score ``samples`` (with the corpus chain of ``corpus``, where given) and store the statistics in
    ``adapter.config.acceptance``."""
    if not samples:
        raise BitaError("calibration needs held-out samples")
    scored = heldout_passes(adapter, model, samples, max_rank, corpus=corpus)
    adapter.config.acceptance = acceptance_record(scored.ranks, scored.probs, scored.chains, max_rank, len(samples),
                                                  scored.targets)
    return adapter.config.acceptance


def calibrate_sampled(adapter: BitaAdapter, model: nn.Module, samples: list[dict], temperature: float,
                      max_rank: int = MAX_RANK, corpus: CorpusIndex | None = None) -> dict:
    """Score ``samples``, whose answers were sampled at ``temperature``, and store a sample of their
    passes, all with their targets, as ``adapter.config.acceptance["sampled_contexts"]``: what sampled
    requests are forecast from (with the greedy answers' passes, bita/plan/sampled_forecast.py).
    Needs ``calibrate`` first."""
    if not adapter.config.acceptance:
        raise BitaError("calibrate the adapter on greedy answers first")
    if not samples:
        raise BitaError("calibration needs held-out samples")
    scored = heldout_passes(adapter, model, samples, max_rank, corpus=corpus)
    record = {"temperature": temperature, "samples": len(samples), "passes": len(scored.ranks),
              **pass_sample_record(scored.ranks, scored.probs, scored.chains, scored.targets, TARGET_PASSES)}
    adapter.config.acceptance["sampled_contexts"] = record
    return record
