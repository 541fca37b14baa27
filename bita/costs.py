"""Measured wall time of one forward pass per tree shape, on the current device."""

from __future__ import annotations

import statistics

import torch
from tqdm import tqdm

from .adapter import BitaAdapter
from .autoregressive import ar_steps
from .decoding import Drafts, prefill, tree_step
from .loading import LoadedModel
from .masks import decode_layout
from .stopping import StopCondition
from .tree import EMPTY_TREE, parse_tree_spec

DRAFTLESS = "draftless"  # a pass with no drafts: root and one mask group
COST_TREES = ["chain:1", "chain:2", "chain:3", "efficient:2,2,2/chain-groups", "efficient:3,2,2/chain-groups",
              "efficient:3,2,2", "efficient:4,3,2", "efficient:5,4,3", "efficient:5,5,5", "full:2,2,2", "full:3,3,3"]


def measure_pass_costs(loaded: LoadedModel, adapter: BitaAdapter, specs: list[str], context: int = 300,
                       repeats: int = 10) -> list[dict]:
    """Median seconds of one pass for plain AR and for each tree (or DRAFTLESS), over a
    ``context``-token cache. Returns dicts with ``tree``, ``rows``, ``seconds``; AR first."""
    generator = torch.Generator().manual_seed(0)
    vocab = loaded.model.get_output_embeddings().weight.shape[0]
    prompt = torch.randint(100, vocab, (context,), generator=generator).tolist()
    ar = ar_steps(loaded.model, prompt, StopCondition(repeats + 2))
    next(ar)  # the prefill is not a decoding pass
    rows = [{"tree": "ar (HF-style 1-token pass)", "rows": 1, "seconds": statistics.median(r.seconds for r in ar)}]
    for spec in tqdm(specs, desc="pass cost", unit="tree"):
        tree = EMPTY_TREE if spec == DRAFTLESS else parse_tree_spec(spec)
        state, _ = prefill(loaded.model, adapter, prompt, tree.max_rank)
        start = state.cache.get_seq_length()
        times = []
        for index in range(repeats + 1):
            state.drafts = Drafts(torch.randint(100, vocab, (adapter.n_masks, tree.max_rank), generator=generator),
                                  torch.full((adapter.n_masks, tree.max_rank), 0.5))
            state, record = tree_step(loaded.model, adapter, state, tree, index)
            state.cache.crop(start - state.cache.get_seq_length())
            state.context_length = context
            times.append(record.seconds)
        rows.append({"tree": spec, "rows": decode_layout(tree, adapter.n_masks).rows,
                     "seconds": statistics.median(times[1:])})
    return rows
