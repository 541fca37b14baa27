"""Greedy BiTA equals greedy AR token for token, on every tiny architecture."""

from collections import Counter

import pytest
import torch
from conftest import WINDOW, assert_lossless, random_prompts, tree_of

from bita.decode.autoregressive import ar_steps
from bita.decode.hf_reference import hf_generate
from bita.decode.pass_logits import Drafts
from bita.decode.records import ACCEPTED
from bita.decode.step import Chains, Decoding, bita_steps, new_cache, prefill, tree_step
from bita.decode.stopping import StopCondition
from bita.drafts.corpus import CorpusIndex
from bita.drafts.sources import BOTH, CORPUS, NGRAM
from bita.drafts.tree import EMPTY_TREE, parse_tree_spec
from bita.drafts.trie import GROUPS_ALL, GROUPS_LAST, GROUPS_NONE
from bita.model.adapter import BitaAdapter
from bita.runtime.runtime import runtime_of

SPECS = ["efficient:3,2,2", "chain:3", "full:2,2,2", "efficient:5,4,3/chain-groups", "chain:1",
         "dynamic:8", "dynamic:16"]


def emitted(steps):
    return [t for record in steps for t in record.emitted]


@pytest.mark.parametrize("spec,prompt_tokens,prompt_style", [(s, 8, "deep") for s in SPECS]
                         + [(SPECS[0], 8, "shallow"), (SPECS[0], 0, "deep")])
def test_bita_equals_hf_generate_and_ar_loop(tiny, spec, prompt_tokens, prompt_style):
    adapter = BitaAdapter.create(tiny, prompt_tokens=prompt_tokens, mask_tokens=3, seed=0, prompt_style=prompt_style)
    decoding = Decoding(runtime_of(tiny), adapter, tree_of(spec))
    for prompt in random_prompts(8, seed=11):
        reference = hf_generate(tiny, prompt, 24, [])
        assert emitted(ar_steps(runtime_of(tiny), prompt, StopCondition(24))) == reference
        records = list(bita_steps(decoding, prompt, StopCondition(24)))
        assert emitted(records) == reference
        assert records[-1].finish == "length" and all(r.finish is None for r in records[:-1])


@pytest.mark.parametrize("spec", ["efficient:3,2,2", "full:2,2,2", "chain:1", "dynamic:12", ""])
def test_bita_is_lossless_past_a_sliding_window(windowed_tiny, spec):
    """Prompts from shorter than the window to five windows long, answers that run past it, on
    every attention pattern (interleaved local/global, all windowed, windowed above full), with
    mask drafts and n-gram chains ('': n-gram chains alone, the no-adapter path)."""
    assert_lossless(runtime_of(windowed_tiny), spec, random_prompts(4, seed=13, low=WINDOW - 3, high=5 * WINDOW))


def test_bita_stops_at_the_same_eos(tiny):
    adapter = BitaAdapter.create(tiny, prompt_tokens=8, mask_tokens=3)
    decoding = Decoding(runtime_of(tiny), adapter, parse_tree_spec("efficient:3,2,2"))
    for prompt in random_prompts(6, seed=21):
        free_run = hf_generate(tiny, prompt, 30, [])
        eos = free_run[9]  # a token the model really produces: generation must stop at its first use
        reference = hf_generate(tiny, prompt, 30, [eos])
        assert reference[-1] == eos and len(reference) <= 10
        records = list(bita_steps(decoding, prompt, StopCondition(30, [eos])))
        assert emitted(records) == reference and records[-1].finish == "eos"


def oracle_drafts(truth, start, n, rank, vocab):
    """Drafts whose true continuation sits at ``rank`` (other ranks: decoys)."""
    future = truth[start:start + n] + [0] * n
    tokens = torch.tensor([[(t + 1 + r) % vocab if r != rank else t for r in range(3)] for t in future[:n]])
    return Drafts(tokens, torch.full(tokens.shape, 1 / 3))


def exact_passes(tiny, spec: str, prepare, passes: int = 5, ngram_groups: str = GROUPS_NONE):
    """Prefill a prompt for tree ``spec``, then ``passes`` tree steps, yielding (state, record)
    after each. Before a step, ``prepare(state, truth, done, vocab)`` may set ``state.drafts``
    and returns extra ``tree_step`` arguments (the chains). Checks that the output so far equals HF
    generate's after every step and that the cache holds exactly the context at the end."""
    adapter = BitaAdapter.create(tiny, prompt_tokens=8, mask_tokens=3)
    decoding = Decoding(runtime_of(tiny), adapter, parse_tree_spec(spec), chains=Chains(ngram_groups=ngram_groups))
    vocab = tiny.get_output_embeddings().weight.shape[0]
    prompt = random_prompts(1, seed=31)[0]
    truth = hf_generate(tiny, prompt, 40, [])
    state, record = prefill(decoding, prompt, new_cache(decoding.runtime, adapter))
    output = [record.bonus]
    for index in range(1, passes + 1):
        state, record = tree_step(decoding, state, index, **prepare(state, truth, len(output), vocab))
        yield state, record
        output += record.accepted + [record.bonus]
        assert output == truth[:len(output)]
    assert state.context_length == len(prompt) + len(output) - 1


@pytest.mark.parametrize("rank,expected_per_pass", [(0, 4), (1, 2)])
def test_acceptance_paths_keep_the_cache_exact(tiny, rank, expected_per_pass):
    """Feed drafts that hold the truth at rank 0 (whole chain accepted, n+1 tokens a pass) or at
    rank 1 (a sibling accepted, then stop: 2 tokens a pass). Output must stay exact throughout,
    which checks the in-place cache compaction on both paths."""
    def with_oracle_drafts(state, truth, done, vocab):
        state.drafts = oracle_drafts(truth, done, 3, rank, vocab)
        return {}

    for _, record in exact_passes(tiny, "efficient:3,3,3", with_oracle_drafts):
        assert len(record.accepted) + 1 == expected_per_pass


class ScriptedChains:
    """Stands in for ``NgramIndex`` in ``bita_steps``: proposes the true continuation
    (``shift`` 0), or those tokens shifted in the vocabulary (always wrong)."""

    def __init__(self, output, truth, shift, vocab):
        self.done, self.truth, self.shift, self.vocab = len(output), truth, shift, vocab

    def extend(self, tokens):
        self.done += len(tokens)

    def propose(self, max_tokens):
        return [(t + self.shift) % self.vocab for t in self.truth[self.done:self.done + max_tokens]]


@pytest.mark.parametrize("chains,spec,ngram_groups", [
    ("lookup", "efficient:3,2,2/chain-groups", GROUPS_NONE), ("lookup", "", GROUPS_NONE),
    ("oracle", "efficient:3,2,2/chain-groups", GROUPS_NONE), ("oracle", "efficient:3,2,2/chain-groups", GROUPS_LAST),
    ("oracle", "chain:2", GROUPS_ALL), ("oracle", "", GROUPS_NONE),
    ("wrong", "efficient:3,2,2/chain-groups", GROUPS_NONE), ("wrong", "", GROUPS_NONE),
    ("lookup", "dynamic:12", GROUPS_NONE), ("oracle", "dynamic:12", GROUPS_LAST), ("wrong", "dynamic:12", GROUPS_NONE)])
def test_bita_with_ngram_chains_equals_hf_generate(tiny, monkeypatch, chains, spec, ngram_groups):
    """Mask drafts and n-gram chains in one trie (n-gram chains alone where ``spec`` is empty),
    the chains looked up in the context as in real use, or forced to hit or to miss."""
    adapter = BitaAdapter.create(tiny, prompt_tokens=8, mask_tokens=3, seed=0)
    decoding = Decoding(runtime_of(tiny), adapter, tree_of(spec) if spec else EMPTY_TREE,
                        chains=Chains(ngram_tokens=4, ngram_groups=ngram_groups))
    vocab = tiny.get_output_embeddings().weight.shape[0]
    sources = Counter()
    for prompt in random_prompts(4, seed=11):
        reference = hf_generate(tiny, prompt, 24, [])
        if chains != "lookup":
            shift = 0 if chains == "oracle" else 7
            monkeypatch.setattr("bita.decode.step.NgramIndex", lambda history, max_match: ScriptedChains(
                history[len(prompt):], reference, shift, vocab))
        records = list(bita_steps(decoding, prompt, StopCondition(24)))
        assert emitted(records) == reference
        sources.update(n.source for r in records for n in r.nodes if n.status == ACCEPTED)
    if chains == "oracle":
        assert sources[NGRAM] + sources[BOTH] >= 24 and len(records) <= 6
    if chains == "wrong":
        assert sources[NGRAM] + sources[BOTH] == 0


@pytest.mark.parametrize("corpus_kind,spec", [("answers", "efficient:3,2,2"), ("answers", ""),
                                               ("answers", "dynamic:12"), ("random", "efficient:3,2,2")])
def test_bita_with_corpus_chains_equals_hf_generate(tiny, corpus_kind, spec):
    """Corpus chains beside mask drafts and n-gram chains: from a corpus holding the model's own
    answers to these prompts (chains land often, even from the prompt's first pass) or random text."""
    adapter = BitaAdapter.create(tiny, prompt_tokens=8, mask_tokens=3, seed=0)
    prompts = random_prompts(4, seed=17)
    eos = [tiny.config.eos_token_id]
    references = [hf_generate(tiny, prompt, 24, eos) for prompt in prompts]
    documents = ([p + r for p, r in zip(prompts, references)] if corpus_kind == "answers"
                 else random_prompts(20, seed=3, low=10, high=60))
    decoding = Decoding(runtime_of(tiny), adapter, tree_of(spec),
                        chains=Chains(ngram_tokens=3, corpus=CorpusIndex.build(documents), corpus_tokens=4))
    sources = Counter()
    for prompt, reference in zip(prompts, references):
        records = list(bita_steps(decoding, prompt, StopCondition(24, eos)))
        assert emitted(records) == reference
        sources.update(s for r in records for s in r.emitted_sources() if s)
    if corpus_kind == "answers":
        assert sum(n for s, n in sources.items() if CORPUS in s) >= 30


@pytest.mark.parametrize("chain_hits,mask_rank,ngram_groups,per_pass,drafts_after", [
    (True, 3, GROUPS_NONE, 5, False),  # n-gram chain accepted past the masks' depth: next pass has no mask drafts
    (True, 3, GROUPS_LAST, 5, True),  # ... unless its last node carries a group
    (True, 0, GROUPS_NONE, 5, False),  # chain and mask chain share 3 nodes, the chain adds a 4th
    (False, 0, GROUPS_NONE, 4, True),  # the chain misses, the masks' whole chain is accepted
    (False, 3, GROUPS_NONE, 1, True),  # everything misses: the root group drafts
])
def test_ngram_paths_keep_the_cache_exact(tiny, chain_hits, mask_rank, ngram_groups, per_pass, drafts_after):
    """Chains of the true continuation (or of wrong tokens) with mask drafts holding the truth at
    rank ``mask_rank`` (3: nowhere). Output stays exact on every path, including passes with no
    mask drafts, which checks the cache compaction and the trie's rows."""
    def with_chain(state, truth, done, vocab):
        if state.drafts is not None:
            state.drafts = oracle_drafts(truth, done, 3, mask_rank, vocab)
        future = truth[done:done + 4]
        return {"ngram": future if chain_hits else [(t + 7) % vocab for t in future]}

    for state, record in exact_passes(tiny, "efficient:3,3,3/chain-groups", with_chain, ngram_groups=ngram_groups):
        assert len(record.accepted) + 1 == per_pass and (state.drafts is not None) == drafts_after
