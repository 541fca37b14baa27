"""The race's vectors (bita/decode/race_draw.py): bitwise ``exponential_``'s draws, the generator left as it
leaves it, from the words alone where the logarithm's rounding is unsure, and ``exponential_`` itself where a
torch draws otherwise."""

import math

import pytest
import torch

from bita.decode import race_draw
from bita.decode.race_draw import draws_as_torch, exponentials, exponentials_from_words, near_a_boundary

pytestmark = pytest.mark.usefixtures("one_thread")


def reference(words: torch.Tensor) -> torch.Tensor:
    """exponential_'s formula token by token with the C library's log1p: words [V] int64 -> [V] float32."""
    units = [(word & ((1 << 53) - 1)) * 2.0 ** -53 for word in words.tolist()]
    return torch.tensor([-1.0 * math.log1p(-u) for u in units], dtype=torch.float64).float()


@pytest.mark.parametrize("size", [1, 2, 1_000, 49_152, 262_144])
def test_the_draws_and_the_state_after_are_exponentials(size):
    theirs, ours = torch.Generator().manual_seed(size), torch.Generator().manual_seed(size)
    for _ in range(3):
        assert torch.equal(exponentials(ours, size), torch.empty(size).exponential_(1, generator=theirs))
    assert torch.equal(ours.get_state(), theirs.get_state())
    assert draws_as_torch()  # the fast path ran: torch 2.13 draws as race_draw.py says


def test_words_give_the_c_librarys_rounding_at_the_edges_and_near_float32_boundaries():
    """u = 0 (+0.0, not -0.0: its sign decides p / E), the largest u, high bits ignored, random words, and words
    whose logarithm lies within rounding of a float32 midpoint (taken token by token; values 0.5-2, where a
    53-bit u can come that close to one)."""
    edges = torch.tensor([0, 1, (1 << 53) - 1, -1, (1 << 62) + 5, 1 << 53], dtype=torch.int64)
    random = torch.randint(0, 2**62, (20_000,), generator=torch.Generator().manual_seed(3))
    floats = torch.rand(2_000, generator=torch.Generator().manual_seed(4), dtype=torch.float64).mul(1.5).add(0.5).float()
    midpoints = (floats.double() + torch.nextafter(floats, torch.tensor(math.inf)).double()) / 2
    close = torch.tensor([round(-math.expm1(-m) * 2.0 ** 53) for m in midpoints.tolist()], dtype=torch.int64)
    for words in (edges, random, close):
        drawn = exponentials_from_words(words)
        assert torch.equal(drawn, reference(words))
        assert torch.equal(drawn.signbit(), torch.zeros_like(drawn, dtype=torch.bool))
    unit = (close & ((1 << 53) - 1)).double() * 2.0 ** -53
    assert near_a_boundary(torch.log1p(-unit).neg()).float().mean() > 0.9


def test_a_torch_that_draws_otherwise_gets_its_own_draw(monkeypatch):
    monkeypatch.setattr(race_draw, "draws_as_torch", lambda: False)
    theirs, ours = torch.Generator().manual_seed(8), torch.Generator().manual_seed(8)
    assert torch.equal(exponentials(ours, 500), torch.empty(500).exponential_(1, generator=theirs))
    assert torch.equal(ours.get_state(), theirs.get_state())
