"""The verification walk, once: root to leaf over a draft tree, accepting at most one child a depth.

Every use of the walk differs only in how a node's child is chosen (``Pick``):

- greedy (Algorithm 1 of the paper): the child whose token is the model's argmax at its parent's row;
- sampled (recursive rejection sampling, below): children tried in rank order, each accepted
  with the model's probability of it, the rejected ones removed from the distribution;
- on ranks (``walk_ranks``, for forecasts): the child whose draft rank is the true token's rank;
- on a finished pass (``StepRecord.accepted_nodes``): the child whose status is accepted.

The bonus token comes after the walk: the argmax, or a draw from what the walk left.

Sampled, the output distribution stays exactly AR's p, pass after pass: at a node, try its
children in rank order; accept child x with probability p(x); on rejection set p(x) = 0 and
renormalise; if all are rejected, draw the bonus from what is left; below an accepted leaf, draw
the bonus from the leaf's p. (SpecInfer's multi-step speculative sampling; EAGLE's
``evaluate_posterior`` with q = 1, BiTA's drafts being deterministic.) Child x_i is emitted with
probability prod_{j<i} (1 - p_j(x_j)) * p_i(x_i) = p(x_i), where p_j is p with x_1..x_{j-1}
removed; any other token y with probability (1 - sum_j p(x_j)) * p(y) / (1 - sum_j p(x_j)) =
p(y). Below an accepted child the same holds for the child's own row. Pure: no model.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from ..drafts.tree import ROOT, DraftTree
from .sampling import Sampling, draw, target_probs

# (the current node or ROOT, its children in rank order) -> the accepted child, or None to stop.
Pick = Callable[[int, tuple[int, ...]], int | None]
Residual = Callable[[torch.Tensor, int], torch.Tensor]


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
    predicted: [1 + size] argmax token at the root row, then at each node's row.
    """
    def pick(current: int, children: tuple[int, ...]) -> int | None:
        return next((c for c in children if candidate_tokens[c] == predicted[1 + current]), None)

    accepted = walk(tree, pick)
    last = accepted[-1] if accepted else ROOT
    return Verification(accepted, predicted[1 + last], last)


def zero_and_renormalise(probs: torch.Tensor, rejected: int) -> torch.Tensor:
    """What the next try draws from after ``rejected`` lost: probs [V] with it removed, renormalised."""
    kept = probs.clone()
    kept[rejected] = 0.0
    return kept / kept.sum()


def verify_sampling(tree: DraftTree, candidate_tokens: Sequence[int], logits: torch.Tensor, sampling: Sampling,
                    generator: torch.Generator, residual: Residual = zero_and_renormalise) -> Verification:
    """Recursive rejection sampling over ``tree`` (see the module docstring).

    candidate_tokens: [size] token of each node. logits: [1 + size, V] the root row, then each
    node's row; only the rows the walk reaches are turned into probabilities (``target_probs``), on
    the logits' device: a tried child costs one number brought back, and only the row the bonus is
    drawn from travels to the generator's device, once a pass.
    residual: the update after a rejection (a test passes a wrong one to see the check fail).
    """
    remaining = None  # probs [V] the bonus is drawn from once the walk stops

    def pick(current: int, children: tuple[int, ...]) -> int | None:
        nonlocal remaining
        probs = target_probs(logits[1 + current][None], sampling)[0]
        for child in children:
            token = candidate_tokens[child]
            if float(torch.rand((), generator=generator)) < float(probs[token]):
                return child
            probs = residual(probs, token)
        remaining = probs
        return None

    accepted = walk(tree, pick)
    return Verification(accepted, draw(remaining, generator), accepted[-1] if accepted else ROOT)


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
