"""The verification walk, once: root to leaf over a draft tree, accepting at most one child a depth.

Every use of the walk differs only in how a node's child is chosen (``Pick``):

- greedy (Algorithm 1 of the paper): the child whose token is the model's argmax at its parent's row;
- sampled: the same walk on race winners: the child whose token is argmax(p / E_t) at its parent's
  row, p that row's warped distribution and E_t the race vector of the position t the row predicts;
- on ranks (``walk_ranks``, for forecasts): the child whose draft rank is the true token's rank;
- on a finished pass (``StepRecord.accepted_nodes``): the child whose status is accepted.

The bonus token comes after the walk: the argmax, or the race winner, at the last accepted row.

Sampled, every emitted token is the one AR emits with the same seed. AR's ``torch.multinomial(p,
1)`` is the exponential race argmax(p / E) with E a fresh Exp(1) vector from the generator
(bita/decode/sampling.py); ``RaceNoise`` gives the token at sequence position t the vector AR
uses there (the request's draw for that position), so the token at t is a function of p_t and the
seed, whoever drafted it. A row of the tree at position t with the accepted path as its context
has AR's p_t there, so its winner is AR's token, and the walk accepts a draft exactly when AR
would have emitted it. Hence exact (each token is the race winner: p-distributed), and no loss of
acceptance: a draft x is accepted with probability p(x), siblings together with sum p(x_i), as
with recursive rejection sampling (SpecInfer), which draws the same law but other tokens.
(Drafter-invariant speculative decoding: Daliri, Musco and Suresh, arXiv 2408.07978.) Pure: no model.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from ..drafts.tree import ROOT, DraftTree
from ..runtime.device import first_argmax
from .sampling import RaceNoise, Sampling, race_winner, target_probs

# (the current node or ROOT, its children in rank order) -> the accepted child, or None to stop.
Pick = Callable[[int, tuple[int, ...]], int | None]
# (a verified row: 0 the root's, 1 + i node i's; the vocabulary's size) -> that row's race vector E [V]
RowNoise = Callable[[int, int], torch.Tensor]
# (the request's noise, the pass's tree, the position the root row predicts) -> the pass's RowNoise
Coupling = Callable[[RaceNoise, DraftTree, int], RowNoise]
# (positions past the one the root row predicts, 0 that one; the vocabulary's size) -> that position's E [V]: what the
# next drafts are raced with (the bonus lies at the accepted drafts' count past it, depth d's draft d further)
AheadNoise = Callable[[int, int], torch.Tensor]


@dataclass(frozen=True)
class Verification:
    """Outcome of a verification walk: ``accepted`` node indices root-to-leaf, the bonus token, and
    ``last`` (the last accepted node, ROOT if none), whose mask group drafts next."""

    accepted: tuple[int, ...]
    bonus: int
    last: int


def walk(tree: DraftTree, pick: Pick) -> tuple[int, ...]:
    """Node indices accepted from the root down, each one ``pick``'s choice among the children of
    the one before (of ROOT first), until ``pick`` returns None."""
    path, current = [], ROOT
    while (child := pick(current, tree.children.get(current, ()))) is not None:
        path.append(child)
        current = child
    return tuple(path)


def verify_greedy(tree: DraftTree, candidate_tokens: Sequence[int], predicted: Sequence[int]) -> Verification:
    """Algorithm 1 of the paper, for any tree.

    candidate_tokens: [size] token of each node.
    predicted: [1 + size] token chosen at the root row, then at each node's row: the argmax, or
    (sampled) the race winner; read only where the walk reaches.
    """
    def pick(current: int, children: tuple[int, ...]) -> int | None:
        return next((c for c in children if candidate_tokens[c] == predicted[1 + current]), None)

    accepted = walk(tree, pick)
    last = accepted[-1] if accepted else ROOT
    return Verification(accepted, predicted[1 + last], last)


def ahead_of(noise: RaceNoise, first: int) -> AheadNoise:
    """The request's vectors by position past ``first``, the position the root row predicts."""
    return lambda offset, size: noise.vector(first + offset, size)


def per_position(noise: RaceNoise, tree: DraftTree, first: int) -> RowNoise:
    """The coupling: a row's vector is the one of the position it predicts, the root row ``first``,
    node i's row first + its depth (rows at one depth share it, across passes too)."""
    ahead = ahead_of(noise, first)
    return lambda row, size: ahead(tree.nodes[row - 1].depth if row else 0, size)


class RowChoices:
    """The token chosen at each of ``rows`` verified rows, ``choose(row)``, computed when first asked: the walk reads
    only the rows it reaches (as many as it accepts, and one)."""

    def __init__(self, rows: int, choose: Callable[[int], int]):
        self.rows, self.choose, self.known = rows, choose, {}

    def __len__(self) -> int:
        return self.rows

    def __getitem__(self, row: int) -> int:
        if row not in self.known:
            self.known[row] = self.choose(row)
        return self.known[row]


def argmaxes(logits: torch.Tensor) -> RowChoices:
    """Each row's argmax of logits [1 + size, V] (the first of equal maxima, as over all rows at once), a row at a
    time when the walk reaches it."""
    return RowChoices(logits.shape[0], lambda row: first_argmax(logits[row]))


def race_winners(logits: torch.Tensor, sampling: Sampling, noise: RowNoise) -> RowChoices:
    """Each row's race winner, argmax(p_row / E_row): p_row the warped distribution of logits [1 + size, V] row
    ``row`` (as AR computes it, one row at a time) and E_row = noise(row, V), a row at a time when the walk reaches
    it."""
    def winner(row: int) -> int:
        probs = target_probs(logits[row][None], sampling)[0]
        return race_winner(probs, noise(row, probs.shape[-1]).to(probs.device))
    return RowChoices(logits.shape[0], winner)


def verify_sampling(tree: DraftTree, candidate_tokens: Sequence[int], logits: torch.Tensor, sampling: Sampling,
                    noise: RowNoise) -> Verification:
    """The greedy walk on race winners (see the module docstring).

    candidate_tokens: [size] token of each node. logits: [1 + size, V] the root row, then each
    node's row; only the rows the walk reaches are warped and raced, on the logits' device (one
    number back a row). noise: each row's race vector, ``per_position`` of the request's noise (a
    test passes a wrong coupling to see the identity with AR fail).
    """
    return verify_greedy(tree, candidate_tokens, race_winners(logits, sampling, noise))


def shared_prefix(chain: Sequence[int], truth: Sequence[int]) -> int:
    """How many of ``chain``'s tokens, from the first, equal ``truth``'s: what a greedy walk accepts of
    a chain when ``truth`` is what the model emits (the shorter one's end counts)."""
    return next((i for i, (a, b) in enumerate(zip(chain, truth)) if a != b), min(len(chain), len(truth)))


def walk_ranks(tree: DraftTree, ranks: Sequence[int]) -> tuple[int, int]:
    """(accepted drafts, last accepted node or ROOT) when the true token of depth d has draft rank
    ``ranks[d-1]`` (a miss matches no node): the walk on ranks instead of tokens."""
    def pick(current: int, children: tuple[int, ...]) -> int | None:
        depth = 0 if current == ROOT else tree.nodes[current].depth
        if depth >= len(ranks):
            return None
        return next((c for c in children if tree.nodes[c].rank == ranks[depth]), None)

    accepted = walk(tree, pick)
    return len(accepted), accepted[-1] if accepted else ROOT
