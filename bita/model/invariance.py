"""Proof, per machine, that a pass is row-invariant: a verification row's logits in a tree pass are
bitwise the logits of the same row in a one-row AR pass.

The lean forward is built for it (exact_attention.py, linears padded to their measured row floor, one
linear path per row count that keeps a row's result), but matrix kernels differ between CPUs and
libraries, so it is checked, not assumed: ``probe_row_invariance`` decodes a fixed sequence of
tokens both ways, as our AR loop (a prefill, then one row a pass) and as BiTA (prompt slots in front,
a prefill with a mask group beside it, then at every row bucket a pass of a chain interleaved with
siblings and mask rows), and compares every verification row's logits bit for bit. Many rows, real
activations: a single row hides most differences of accumulation order (design notes, section 7).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from .device import output_logits

PROBE_BUCKETS = (2, 4, 8, 16, 32)
PREFIX, DECODED, PROMPT_SLOTS, MASKS = 24, 16, 4, 3


@dataclass(frozen=True)
class Invariance:
    """The probe's outcome: rows compared, rows whose logits differed, the largest difference, and per
    pass (``"prefill"`` or the row count) the rows that differed."""

    rows: int
    differing: int
    worst: float
    by_pass: dict[str, int]

    @property
    def holds(self) -> bool:
        return self.rows > 0 and self.differing == 0

    def describe(self) -> str:
        if self.holds:
            return f"row-invariant ({self.rows} rows bitwise equal at {', '.join(self.by_pass)} rows)"
        failing = ", ".join(f"{name}: {count}" for name, count in self.by_pass.items() if count)
        return (f"not row-invariant: {self.differing} of {self.rows} rows differ from AR (worst logit "
                f"{self.worst:.2e}; by pass {failing})")


def _ar_logits(model: nn.Module, lean, tokens: torch.Tensor) -> torch.Tensor:
    """Our AR loop's logits [DECODED + 1, V] at positions PREFIX - 1 .. PREFIX + DECODED - 1."""
    embed = model.get_input_embeddings()
    cache = lean.new_cache(len(tokens))
    try:
        allowed = torch.ones(PREFIX, PREFIX, dtype=torch.bool).tril()
        hidden = [lean.forward(cache, embed(tokens[:PREFIX]), torch.arange(PREFIX), allowed)[-1:]]
        for position in range(PREFIX, PREFIX + DECODED):
            hidden.append(lean.forward(cache, embed(tokens[position:position + 1]), torch.tensor([position]),
                                       torch.ones(1, position + 1, dtype=torch.bool)))
        return torch.cat([output_logits(model, row) for row in hidden])
    finally:
        lean.release(cache)


def _tree_pass(rows: int, chain: int, cached: int, base: int) -> tuple[torch.Tensor, list[int], torch.Tensor]:
    """A pass of ``rows`` rows after ``base`` prompt slots and ``cached`` tokens: the root, then ``chain``
    nodes each after a sibling (a leaf beside it, so the chain's slots are not contiguous), then mask
    rows on the root. Returns allowed [rows, base + cached + rows], the root's and chain's rows, and
    each row's depth [rows]."""
    start = base + cached
    allowed = torch.zeros(rows, start + rows, dtype=torch.bool)
    allowed[:, base:start] = True
    depth = torch.ones(rows, dtype=torch.long)
    path, verified, row = [start], [0], 1
    allowed[0, start], depth[0] = True, 0
    for level in range(1, chain + 1):
        for is_node in (False, True):
            if row == rows:
                break
            allowed[row, path + [start + row]] = True
            depth[row] = level
            if is_node:
                path, verified = path + [start + row], verified + [row]
            row += 1
    for mask in range(row, rows):
        allowed[mask, :base] = True
        allowed[mask, [start, start + mask]] = True
    return allowed, verified, depth


@torch.inference_mode()
def probe_row_invariance(model: nn.Module, lean, seed: int = 0) -> Invariance:
    """Compare BiTA-shaped passes with our AR loop on the lean forward ``lean`` of ``model``, bitwise."""
    generator = torch.Generator().manual_seed(seed)
    vocab = model.get_input_embeddings().weight.shape[0]
    tokens = torch.randint(3, vocab, (PREFIX + DECODED,), generator=generator)
    reference = _ar_logits(model, lean, tokens)
    embed = model.get_input_embeddings()
    dtype = embed.weight.dtype
    cache = lean.new_cache(PROMPT_SLOTS + len(tokens) + max(PROBE_BUCKETS))
    by_pass, differing, rows, worst = {}, 0, 0, 0.0

    def compare(name: str, logits: torch.Tensor, expected: torch.Tensor) -> None:
        nonlocal differing, rows, worst
        rows += len(logits)
        unequal = (logits != expected).any(-1)
        by_pass[name] = int(unequal.sum())
        differing += by_pass[name]
        worst = max(worst, float((logits - expected).abs().max()))

    try:
        cache.reserve(PROMPT_SLOTS)
        for layer in range(len(lean.layers)):
            shape = (1, lean.kv_heads, PROMPT_SLOTS, lean.head_dim)
            cache.append(layer, torch.randn(shape, generator=generator).to(dtype),
                         torch.randn(shape, generator=generator).to(dtype))
        cache.advance(PROMPT_SLOTS)
        cache.base = PROMPT_SLOTS
        masks = torch.randn(MASKS, embed.weight.shape[1], generator=generator).to(dtype)
        allowed = torch.zeros(PREFIX + MASKS, PROMPT_SLOTS + PREFIX + MASKS, dtype=torch.bool)
        allowed[:PREFIX, PROMPT_SLOTS:PROMPT_SLOTS + PREFIX] = torch.ones(PREFIX, PREFIX, dtype=torch.bool).tril()
        allowed[PREFIX:, :PROMPT_SLOTS + PREFIX] = True
        allowed[PREFIX:, PROMPT_SLOTS + PREFIX:] = torch.ones(MASKS, MASKS, dtype=torch.bool).tril()
        positions = torch.cat([torch.arange(PREFIX), PREFIX + torch.arange(MASKS)])
        hidden = lean.forward(cache, torch.cat([embed(tokens[:PREFIX]), masks]), positions, allowed)
        compare("prefill", output_logits(model, hidden[PREFIX - 1:])[:1], reference[:1])
        cache.keep(PROMPT_SLOTS, list(range(PREFIX)))
        for bucket in PROBE_BUCKETS:
            allowed, verified, depth = _tree_pass(bucket, min(bucket // 2, DECODED - 1), PREFIX, PROMPT_SLOTS)
            fed = torch.randint(3, vocab, (bucket,), generator=generator)
            fed[verified] = tokens[PREFIX:PREFIX + len(verified)]
            embeds = embed(fed)
            is_mask = allowed[:, :PROMPT_SLOTS].any(-1)
            embeds[is_mask] = masks[0]
            hidden = lean.forward(cache, embeds, PREFIX + depth, allowed)
            compare(str(bucket), output_logits(model, hidden)[verified], reference[1:1 + len(verified)])
            cache.crop(-bucket)
    finally:
        lean.release(cache)
    return Invariance(rows, differing, worst, by_pass)
