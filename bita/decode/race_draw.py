"""The race's vectors of Exp(1) variables: what ``torch.empty(V).exponential_(1, generator=g)`` draws, bitwise,
leaving ``g`` in the same state, in less than half its time.

On the CPU (torch 2.13) ``exponential_`` draws, token after token, one 64-bit word from the generator's
mt19937 (two 32-bit outputs), keeps its low 53 bits as u = bits * 2**-53, and stores the float32 rounding
of -1.0 * log1p(-u), computed in float64 by the C library's ``log1p``: one serial loop, about 30 ns a token.
``exponentials`` draws the same words with ``random_`` on an int64 tensor (the same 64-bit draws, no
logarithm: about 6 ns a token) and takes the logarithm with torch's vectorised float64 ``log1p``. That one
and the C library's are each within an ulp or two of the true logarithm, so they round to the same float32
wherever the float64 result lies more than ``AGREEMENT`` (relative: 16 float64 ulps) from a float32
rounding boundary; the few that lie closer (about one token in 2**23) and u = 0 (where the sign of a zero
decides) are taken by ``math.log1p``, the C library's own. Whether this torch draws as described is
checked once a process (``draws_as_torch``); where it does not, ``exponentials`` calls ``exponential_``.
"""

from __future__ import annotations

import functools
import math

import torch

FRACTION_BITS = 53  # uniform_real<double>: the low 53 bits of a 64-bit word ...
UNIT = 2.0 ** -FRACTION_BITS  # ... times this, in [0, 1)
AGREEMENT = 2.0 ** -48  # a float64 logarithm this close (relative) to the C library's rounds to its float32
CHECKED_DRAWS = 4096  # how many tokens ``draws_as_torch`` compares, over three vectors


def exponentials_from_words(words: torch.Tensor) -> torch.Tensor:
    """words [V] int64 (the generator's 64-bit draws, as ``random_`` gives them: their low 63 bits) -> [V]
    float32: the float32 rounding of -1.0 * log1p(-u), u = (low 53 bits) * 2**-53, with the C library's
    ``log1p``: what ``exponential_(1)`` makes of the same draws."""
    uniform = (words & ((1 << FRACTION_BITS) - 1)).double().mul_(UNIT)
    logarithm = torch.log1p(uniform.neg()).neg_()  # [V] float64, torch's: an ulp or two from the C library's
    rounded = logarithm.float()
    for token in (near_a_boundary(logarithm) | (uniform == 0)).nonzero()[:, 0].tolist():
        rounded[token] = -1.0 * math.log1p(-uniform[token].item())
    return rounded


def near_a_boundary(logarithm: torch.Tensor) -> torch.Tensor:
    """logarithm [V] float64 -> [V] bool: where a value ``AGREEMENT`` (relative) away rounds to another float32."""
    return (logarithm * (1 - AGREEMENT)).float() != (logarithm * (1 + AGREEMENT)).float()


def exponentials(generator: torch.Generator, size: int) -> torch.Tensor:
    """[size] float32 Exp(1) variables drawn from the CPU ``generator``: bitwise ``torch.empty(size).exponential_(1,
    generator=generator)``, and the generator's state after them the same."""
    if not draws_as_torch():
        return torch.empty(size, dtype=torch.float32).exponential_(1, generator=generator)
    return exponentials_from_words(torch.empty(size, dtype=torch.int64).random_(generator=generator))


@functools.cache
def draws_as_torch() -> bool:
    """Whether ``exponentials_from_words`` over ``random_``'s words gives this torch's ``exponential_`` draws and
    leaves the generator as it does (three vectors from one seed, and the state after them)."""
    theirs, ours = torch.Generator().manual_seed(0), torch.Generator().manual_seed(0)
    for size in (1, CHECKED_DRAWS // 2, CHECKED_DRAWS // 2 - 1):
        drawn = torch.empty(size, dtype=torch.float32).exponential_(1, generator=theirs)
        if not torch.equal(exponentials_from_words(torch.empty(size, dtype=torch.int64).random_(generator=ours)),
                           drawn):
            return False
    return torch.equal(theirs.get_state(), ours.get_state())
