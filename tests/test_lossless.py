"""Greedy BiTA equals greedy AR token for token, on every tiny architecture."""

import pytest
import torch
from conftest import random_prompts

from bita.adapter import BitaAdapter
from bita.autoregressive import ar_steps, hf_generate
from bita.decoding import Drafts, bita_steps, prefill, tree_step
from bita.stopping import StopCondition
from bita.tree import parse_tree_spec

SPECS = ["efficient:3,2,2", "chain:3", "full:2,2,2", "efficient:5,4,3/chain-groups", "chain:1"]


def emitted(steps):
    return [t for record in steps for t in record.emitted]


@pytest.mark.parametrize("spec,prompt_tokens,prompt_style", [(s, 8, "deep") for s in SPECS]
                         + [(SPECS[0], 8, "shallow"), (SPECS[0], 0, "deep")])
def test_bita_equals_hf_generate_and_ar_loop(tiny, spec, prompt_tokens, prompt_style):
    adapter = BitaAdapter.create(tiny, prompt_tokens=prompt_tokens, mask_tokens=3, seed=0, prompt_style=prompt_style)
    tree = parse_tree_spec(spec)
    for prompt in random_prompts(8, seed=11):
        reference = hf_generate(tiny, prompt, 24, [])
        assert emitted(ar_steps(tiny, prompt, StopCondition(24))) == reference
        records = list(bita_steps(tiny, adapter, prompt, tree, StopCondition(24)))
        assert emitted(records) == reference
        assert records[-1].finish == "length" and all(r.finish is None for r in records[:-1])


def test_bita_stops_at_the_same_eos(tiny):
    adapter = BitaAdapter.create(tiny, prompt_tokens=8, mask_tokens=3)
    tree = parse_tree_spec("efficient:3,2,2")
    for prompt in random_prompts(6, seed=21):
        free_run = hf_generate(tiny, prompt, 30, [])
        eos = free_run[9]  # a token the model really produces: generation must stop at its first use
        reference = hf_generate(tiny, prompt, 30, [eos])
        assert reference[-1] == eos and len(reference) <= 10
        records = list(bita_steps(tiny, adapter, prompt, tree, StopCondition(30, [eos])))
        assert emitted(records) == reference and records[-1].finish == "eos"


def oracle_drafts(truth, start, n, rank, vocab):
    """Drafts whose true continuation sits at ``rank`` (other ranks: decoys)."""
    future = truth[start:start + n] + [0] * n
    tokens = torch.tensor([[(t + 1 + r) % vocab if r != rank else t for r in range(3)] for t in future[:n]])
    return Drafts(tokens, torch.full(tokens.shape, 1 / 3))


@pytest.mark.parametrize("rank,expected_per_pass", [(0, 4), (1, 2)])
def test_acceptance_paths_keep_the_cache_exact(tiny, rank, expected_per_pass):
    """Feed drafts that hold the truth at rank 0 (whole chain accepted, n+1 tokens a pass) or at
    rank 1 (a sibling accepted, then stop: 2 tokens a pass). Output must stay exact throughout,
    which checks the in-place cache compaction on both paths."""
    adapter = BitaAdapter.create(tiny, prompt_tokens=8, mask_tokens=3)
    tree = parse_tree_spec("efficient:3,3,3")
    vocab = tiny.get_output_embeddings().weight.shape[0]
    prompt = random_prompts(1, seed=31)[0]
    truth = hf_generate(tiny, prompt, 40, [])
    state, record = prefill(tiny, adapter, prompt, tree)
    output = [record.bonus]
    for index in range(1, 6):
        state.drafts = oracle_drafts(truth, len(output), 3, rank, vocab)
        state, record = tree_step(tiny, adapter, state, tree, index)
        assert len(record.accepted) + 1 == expected_per_pass
        output += record.accepted + [record.bonus]
        assert output == truth[:len(output)]
    assert state.context_length == len(prompt) + len(output) - 1
