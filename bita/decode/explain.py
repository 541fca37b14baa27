"""What the verifier said about each emitted token: the top-k of the row that chose it, the runner-up, the
entropy, the drafts it turned down there, and whether the choice was a near tie. Pure: logits in, verdicts out.

Every emitted token is chosen at one verified row: the root's row chooses the first, each accepted node's row
the next (the last one chose the bonus). A row's distribution is the one the token was chosen from: greedy,
the softmax of the raw logits (the token is its argmax); sampled, the warped target distribution AR draws from
(``target_probs``, bita/decode/sampling.py; the token is the race winner, not always the likeliest), with the
raw softmax beside it.

A **near tie** is the one rule the benchmarks use where two outputs part (bita/bench/divergence.py): the
chosen token's and the runner-up's logits are within NEAR_TIE_ULPS units in the last place of the model's
dtype at the top logit, so rounding alone (another kernel, another arithmetic) could swap them. In fp32
that is a gap of about 1e-5 (practically never); in bf16 about 0.6 at a top logit of 20.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from ..drafts.tree import ROOT, DraftTree
from .sampling import Sampling, largest, warped_scores
from .verify import RowNoise, Verification

TOP_K = 5  # alternatives kept per row
NEAR_TIE_ULPS = 4  # units in the last place at the top logit within which an order is put down to rounding


def rounding_gap(top_logit: float, dtype: torch.dtype) -> float:
    """The logit gap rounding alone may close at ``top_logit`` in ``dtype``: NEAR_TIE_ULPS units in the last place."""
    return NEAR_TIE_ULPS * abs(top_logit) * torch.finfo(dtype).eps


def near_tie(gap: float, rounding: float) -> bool:
    """Whether two logits ``gap`` apart are a near tie where rounding may close ``rounding`` (``rounding_gap``)."""
    return abs(gap) <= rounding


@dataclass(frozen=True)
class Alternative:
    """One token at one verified row: its raw logit, its probability in the distribution the row's token was
    chosen from (``prob``), and in the softmax of the raw logits (``raw_prob``; the same when greedy)."""

    token: int
    logit: float
    prob: float
    raw_prob: float
    tempered: float | None = None  # sampled: softmax(logits / temperature), before top-k and top-p cut
    noise: float | None = None  # sampled: the token's race draw E (Exp(1)) at the row's position; it wins by p / E


@dataclass(frozen=True)
class Warp:
    """How a sampled row's distribution was warped (bita/decode/sampling.py): the settings, and the tokens
    top-k and top-p kept (``kept``) with their share of the tempered distribution (``kept_mass``)."""

    temperature: float
    top_k: int
    top_p: float
    kept: int
    kept_mass: float


@dataclass(frozen=True)
class RowVerdict:
    """The verifier's row that chose one emitted token.

    chosen: the emitted token. top: the TOP_K highest logits, best first, the chosen token first among equal
    logits (so greedy, it is the first). rejected: the drafts checked at this row and turned down, in the order the walk tried them (the
    drafts that lost to the bonus, or the siblings of the accepted draft). entropy: nats, of the distribution
    the token was chosen from. rounding: the logit gap rounding may close here (``rounding_gap``). warp:
    sampled, how the distribution was warped (each Alternative then carries ``tempered`` and ``noise``).
    """

    chosen: Alternative
    top: tuple[Alternative, ...]
    rejected: tuple[Alternative, ...]
    entropy: float
    rounding: float
    warp: Warp | None = None

    @property
    def runner_up(self) -> Alternative:
        """The likeliest token other than the chosen one."""
        return next(a for a in self.top if a.token != self.chosen.token)

    @property
    def logit_margin(self) -> float:
        """Chosen minus runner-up logit (negative where a sample drew a less likely token)."""
        return self.chosen.logit - self.runner_up.logit

    @property
    def prob_margin(self) -> float:
        """Chosen minus runner-up probability, in the distribution the token was chosen from."""
        return self.chosen.prob - self.runner_up.prob

    @property
    def near_tie(self) -> bool:
        return near_tie(self.logit_margin, self.rounding)


def row_verdicts(logits: torch.Tensor, chosen: Sequence[int], rejected: Sequence[Sequence[int]],
                 sampling: Sampling, dtype: torch.dtype, noise: Sequence[torch.Tensor] = ()) -> list[RowVerdict]:
    """[E] verdicts of E verified rows, from their logits [E, V] (any device), the token each chose [E], and
    the drafts each turned down ([E] lists of token ids); ``sampling`` says which distribution chose them,
    ``dtype`` is the model's (for the near-tie rule); sampled, ``noise`` holds each row's race vector [V] (the
    draws the token won, bita/decode/sampling.py) and each verdict its ``Warp``. One top-k (``largest``),
    one copy back (``tolist``)."""
    raw = logits.float()
    log_raw = torch.log_softmax(raw, -1)  # [E, V]
    tables = [raw, log_raw]
    if not sampling.greedy:  # drawn from, and the tempered softmax before the cut
        scores = warped_scores(raw, sampling)
        tables += [torch.softmax(scores, -1), torch.softmax(raw / float(sampling.temperature), -1)]
    k, width = min(TOP_K, raw.shape[-1]), max(map(len, rejected), default=0)
    asked = [[token, *drafts, *[token] * (width - len(drafts))] for token, drafts in zip(chosen, rejected)]
    columns = torch.cat([largest(raw, k)[1], torch.tensor(asked, dtype=torch.long).to(raw.device)], 1)
    size = columns.shape[1]  # k + 1 + width: the top k, the chosen token, the drafts turned down (padded)
    # ids (exact in float32: vocabularies hold far fewer than 2**24 tokens), then each table's values
    values = [columns.float()] + [table.gather(1, columns) for table in tables]
    if sampling.greedy:  # entropy = log Z - E_p[logit]: E_p[logit] made in log_raw's place (a new [E, V] costs)
        scalars = [log_raw.exp_().mul_(raw).sum(-1)]
    else:  # the entropy itself, then the kept set's size and tempered mass
        kept = torch.isfinite(scores)
        values.append(torch.stack([vector.to(raw.device)[row] for vector, row in zip(noise, columns)]))
        scalars = [torch.special.entr(tables[2]).sum(-1), kept.sum(-1).float(),
                   tables[3].masked_fill(~kept, 0).sum(-1)]
    rows = torch.cat(values + [s[:, None] for s in scalars], 1).tolist()  # one copy back
    return [row_verdict(row, size, k, len(drafts), sampling, dtype) for row, drafts in zip(rows, rejected)]


def row_verdict(row: list[float], size: int, k: int, drafts: int, sampling: Sampling,
                dtype: torch.dtype) -> RowVerdict:
    """One verdict from its row of ``row_verdicts``' copy: ``size`` columns (the top ``k``, the chosen token,
    its ``drafts`` turned down, padding) of ids, logits, log-probabilities and, sampled, the distribution
    drawn from, the tempered one and the race draws; then the scalars."""
    tables = 3 if sampling.greedy else 6
    ids, logit_row, log_raw_row, *sampled = (row[t * size:(t + 1) * size] for t in range(tables))
    raw_row = [math.exp(value) for value in log_raw_row]
    if sampled:
        drawn, tempered, noise = sampled
        found = [Alternative(int(i), *values) for i, *values in zip(ids, logit_row, drawn, raw_row, tempered, noise)]
    else:
        found = [Alternative(int(i), logit, prob, prob) for i, logit, prob in zip(ids, logit_row, raw_row)]
    top = sorted(found[:k], key=lambda a: (-a.logit, a.token != found[k].token))  # at a tie the chosen first
    spread = row[tables * size]
    entropy = spread if sampled else logit_row[k] - log_raw_row[k] - spread  # log Z = logit - log p, any token
    warp = Warp(float(sampling.temperature), sampling.top_k, float(sampling.top_p), int(row[-2]), row[-1]) \
        if sampled else None
    return RowVerdict(found[k], tuple(top), tuple(found[k + 1:k + 1 + drafts]), entropy,
                      rounding_gap(top[0].logit, dtype), warp)


def emitting_rows(tree: DraftTree, accepted: Sequence[int]) -> tuple[list[int], list[list[int]]]:
    """The verified rows that chose a pass's tokens, in order (0: the root's; 1 + i: node i's), one per
    accepted node plus the bonus's, and per row the nodes checked there and turned down (its children other
    than the accepted one, in rank order; nodes below a rejected draft were never checked)."""
    parents = [ROOT, *accepted]
    taken = [*accepted, None]
    rows = [0 if parent == ROOT else 1 + parent for parent in parents]
    turned_down = [[c for c in tree.children.get(parent, ()) if c != next_node]
                   for parent, next_node in zip(parents, taken)]
    return rows, turned_down


def pass_verdicts(verified: torch.Tensor, tree: DraftTree, tokens: Sequence[int], verdict: Verification,
                  sampling: Sampling, dtype: torch.dtype, noise: RowNoise | None = None) -> list[RowVerdict]:
    """A tree pass's verdicts, one per token of accepted + [bonus]: from its verified logits [1 + N, V] (the
    root's row, then each node's), its tree of N nodes with their ``tokens`` [N], and its ``verdict``;
    sampled, ``noise`` gives each verified row's race vector (the walk drew every emitting row's)."""
    rows, turned_down = emitting_rows(tree, verdict.accepted)
    chosen = [tokens[i] for i in verdict.accepted] + [verdict.bonus]
    index = torch.tensor(rows).to(verified.device)
    vectors = [noise(row, verified.shape[-1]) for row in rows] if noise is not None else ()
    return row_verdicts(verified.index_select(0, index), chosen, [[tokens[c] for c in row] for row in turned_down],
                        sampling, dtype, vectors)
