"""Proof, per machine, that a pass is row-invariant: a verification row's logits in a tree pass are
bitwise the logits of the same row in a one-row AR pass.

Our forwards are built for it (exact_attention.py in the lean forward and in hf_attention.py's attention,
linears padded to their measured row floor, one linear path for every row count),
but matrix kernels differ between CPUs and libraries, and transformers' code computes norms, rotary and
activations its own way per architecture, so it is checked, not assumed: ``probe_row_invariance``
decodes a fixed sequence of tokens both ways, as our AR loop (a prefill, then one row a pass) and as
BiTA (prompt slots in front, a prefill with a mask group beside it, then at each of ``PASS_ROWS`` a pass of
a chain interleaved with siblings and mask rows), and compares every verification row's logits bit
for bit. Many rows, real activations: a single row hides most differences of accumulation order
(design notes, section 7).
"""

from __future__ import annotations

import torch

from .runtime import Invariance, Runtime
from .transformers_forward import kv_shapes

PASS_ROWS = (2, 4, 8, 16, 32)  # the rows of the probe's tree passes
PREFIX, DECODED, PROMPT_SLOTS, MASKS = 24, 16, 4, 3


def _ar_logits(runtime: Runtime, tokens: torch.Tensor) -> torch.Tensor:
    """Our AR loop's logits [DECODED + 1, V] at positions PREFIX - 1 .. PREFIX + DECODED - 1."""
    embed = runtime.model.get_input_embeddings()
    cache = runtime.new_cache(rows=len(tokens))
    try:
        allowed = torch.ones(PREFIX, PREFIX, dtype=torch.bool).tril()
        hidden = [runtime.run(cache, embed(tokens[:PREFIX]), torch.arange(PREFIX), allowed)[-1:]]
        for position in range(PREFIX, PREFIX + DECODED):
            hidden.append(runtime.run(cache, embed(tokens[position:position + 1]), torch.tensor([position]),
                                      torch.ones(1, position + 1, dtype=torch.bool)))
        return torch.cat([runtime.logits(row) for row in hidden])
    finally:
        runtime.release(cache)


def _tree_pass(rows: int, chain: int, cached: int, base: int) -> tuple[torch.Tensor, list[int], torch.Tensor, int]:
    """A pass of ``rows`` rows after ``base`` prompt slots and ``cached`` tokens: the root, then ``chain``
    nodes each after a sibling (a leaf beside it, so the chain's slots are not contiguous), then mask
    rows on the root. Returns allowed [rows, base + cached + rows], the root's and chain's rows, each row's
    depth [rows], and the count of token rows (before the mask rows)."""
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
    return allowed, verified, depth, row


@torch.inference_mode()
def probe_row_invariance(runtime: Runtime, seed: int = 0) -> Invariance:
    """Compare BiTA-shaped passes with our AR loop on ``runtime``'s forward, bitwise."""
    generator = torch.Generator().manual_seed(seed)
    embed = runtime.model.get_input_embeddings()
    vocab, dtype, device = embed.weight.shape[0], embed.weight.dtype, embed.weight.device
    tokens = torch.randint(3, vocab, (PREFIX + DECODED,), generator=generator).to(device)
    reference = _ar_logits(runtime, tokens)
    prompts = [tuple(torch.randn(1, heads, PROMPT_SLOTS, dim, generator=generator).to(device, dtype) for _ in "kv")
               for heads, dim in kv_shapes(runtime.model)]
    cache = runtime.new_cache(prompts, len(tokens) + max(PASS_ROWS))
    by_pass, differing, rows, worst = {}, 0, 0, 0.0

    def compare(name: str, logits: torch.Tensor, expected: torch.Tensor) -> None:
        nonlocal differing, rows, worst
        rows += len(logits)
        unequal = (logits != expected).any(-1)
        by_pass[name] = int(unequal.sum())
        differing += by_pass[name]
        worst = max(worst, float((logits - expected).abs().max()))

    try:
        masks = torch.randn(MASKS, embed.weight.shape[1], generator=generator).to(device, dtype)
        allowed = torch.zeros(PREFIX + MASKS, PROMPT_SLOTS + PREFIX + MASKS, dtype=torch.bool)
        allowed[:PREFIX, PROMPT_SLOTS:PROMPT_SLOTS + PREFIX] = torch.ones(PREFIX, PREFIX, dtype=torch.bool).tril()
        allowed[PREFIX:, :PROMPT_SLOTS + PREFIX] = True
        allowed[PREFIX:, PROMPT_SLOTS + PREFIX:] = torch.ones(MASKS, MASKS, dtype=torch.bool).tril()
        positions = torch.cat([torch.arange(PREFIX), PREFIX + torch.arange(MASKS)])
        hidden = runtime.run(cache, torch.cat([embed(tokens[:PREFIX]), masks]), positions, allowed, PREFIX)
        compare("prefill", runtime.logits(hidden[PREFIX - 1:])[:1], reference[:1])
        cache.keep(PROMPT_SLOTS, list(range(PREFIX)))
        for count in PASS_ROWS:
            allowed, verified, depth, ordinary = _tree_pass(count, min(count // 2, DECODED - 1), PREFIX, PROMPT_SLOTS)
            fed = torch.randint(3, vocab, (count,), generator=generator).to(device)
            fed[verified] = tokens[PREFIX:PREFIX + len(verified)]
            embeds = embed(fed)
            embeds[ordinary:] = masks[0]
            hidden = runtime.run(cache, embeds, PREFIX + depth, allowed, ordinary)
            compare(str(count), runtime.logits(hidden)[verified], reference[1:1 + len(verified)])
            cache.crop(-count)
    finally:
        runtime.release(cache)
    return Invariance(rows, differing, worst, by_pass)
