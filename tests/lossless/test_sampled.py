"""Sampled BiTA emits exactly what sampled AR emits with the same seed, on tiny models over 16 tokens.

Token for token: on every tiny family, over many seeds, temperatures, top-p / top-k settings and
tree shapes with n-gram (and corpus) drafts, sampled BiTA's tokens are our AR loop's; a wrong
coupling of the race vectors (a fresh one per pass, or one per node) fails that identity. In
distribution too: for several trees and settings, the joint distribution of the first TOKENS
sampled tokens is estimated from RUNS seeded runs of BiTA and RUNS of our AR loop (disjoint
seeds) and compared by a two-sample chi-square test at ALPHA; BiTA with one race vector for a
whole pass fails the same test. Our AR loop itself draws what HF ``generate(do_sample=True)``
draws, token for token, with the same seed.
"""

from collections import Counter
from dataclasses import replace
from itertools import zip_longest

import pytest
import torch
from chi_square import homogeneity
from conftest import COMMON, TINY_CONFIGS, WINDOW, WINDOWED_CONFIGS, planned_tiny, random_prompts, tiny_model, tree_of
from transformers import AutoModelForCausalLM, LlamaConfig

from bita.decode.autoregressive import ar_steps
from bita.decode.hf_reference import hf_generate
from bita.decode.sampling import Sampling
from bita.decode.step import Chains, Decoding, bita_steps
from bita.decode.stopping import StopCondition
from bita.drafts.corpus import CorpusIndex
from bita.drafts.tree import parse_tree_spec
from bita.model.adapter import BitaAdapter
from bita.runtime.runtime import runtime_of

ALPHA = 1e-3  # a correct BiTA fails one of these tests with probability ALPHA; seeds are fixed, so CI is deterministic
RUNS = 1200  # per method and case
TOKENS = 3  # the first TOKENS sampled tokens, as one joint category
SMALL_VOCAB = 16
PROMPT = [3, 5, 7, 9, 11, 4]
LONG_PROMPT = torch.randint(3, SMALL_VOCAB, (3 * WINDOW,), generator=torch.Generator().manual_seed(2)).tolist()
BITA_SEEDS = 1_000_000  # BiTA's seeds start here, AR's at 0: the two samples are independent

pytestmark = pytest.mark.usefixtures("one_thread")


def with_vocab(config, vocab: int = SMALL_VOCAB):
    config.vocab_size = vocab
    return config


def drafting_model(config):
    """The runtime (transformers' forward as it is) of a tiny model of ``config`` over 16 tokens, with an
    untrained adapter whose drafts land often: every input embedding and every mask embedding share one
    direction, so the mask rows predict roughly what the ordinary rows do. Both paths of the walk, accept
    and reject, stay busy."""
    torch.manual_seed(0)
    config.initializer_range = 0.2
    model = AutoModelForCausalLM.from_config(config).eval().requires_grad_(False)
    adapter = BitaAdapter.create(model, prompt_tokens=8, mask_tokens=3, seed=0)
    shared = torch.randn(config.hidden_size, generator=torch.Generator().manual_seed(1)) * 0.4
    model.get_input_embeddings().weight.data += shared
    adapter.mask_embeddings.data += shared
    return runtime_of(model), adapter


@pytest.fixture(scope="module")
def drafting():
    return drafting_model(with_vocab(LlamaConfig(**COMMON)))


@pytest.fixture(scope="module")
def windowed_drafting():
    """Gemma 3's interleaved local/global layers, sampled after a prompt three windows long."""
    return drafting_model(with_vocab(WINDOWED_CONFIGS["gemma3"]()))


def emitted(steps) -> list[int]:
    return [t for record in steps for t in record.emitted]


def ar_counter(runtime, prompt):
    """settings (temperature, top_p, top_k) -> Counter of AR's first TOKENS tokens over RUNS seeds."""
    cache: dict[tuple, Counter] = {}

    def counts(settings: tuple) -> Counter:
        if settings not in cache:
            cache[settings] = Counter(
                tuple(emitted(ar_steps(runtime, prompt, StopCondition(TOKENS), Sampling(*settings, seed=seed))))
                for seed in range(RUNS))
        return cache[settings]
    return counts


@pytest.fixture(scope="module")
def ar_counts(drafting):
    return ar_counter(drafting[0], PROMPT)


def bita_counts(drafting, spec: str, settings: tuple, ngram_tokens: int, prompt: list[int] = PROMPT,
                corpus: CorpusIndex | None = None, coupling=None) -> tuple[Counter, float]:
    """Counter of BiTA's first TOKENS tokens after ``prompt`` over RUNS seeds (with corpus chains as
    long as the n-gram chains when ``corpus`` is given; a test's wrong ``coupling``), and the share
    of its tree passes that accepted a draft."""
    runtime, adapter = drafting
    counts, passes, accepting = Counter(), 0, 0
    extra = {"coupling": coupling} if coupling else {}
    decoding = Decoding(runtime, adapter, tree_of(spec), chains=Chains(
        ngram_tokens=ngram_tokens, corpus=corpus, corpus_tokens=ngram_tokens if corpus else 0), **extra)
    for seed in range(BITA_SEEDS, BITA_SEEDS + RUNS):
        records = list(bita_steps(replace(decoding, sampling=Sampling(*settings, seed=seed)), prompt,
                                  StopCondition(TOKENS)))
        counts[tuple(emitted(records))] += 1
        passes += len(records) - 1
        accepting += sum(bool(r.accepted) for r in records)
    return counts, accepting / max(1, passes)


CASES = [  # tree, (temperature, top_p, top_k), n-gram chain length
    ("chain:1", (1.0, 1.0, 0), 0),
    ("efficient:3,2,2", (0.7, 1.0, 0), 0),
    ("full:2,2,2", (1.0, 1.0, 0), 0),
    ("efficient:3,2,2/chain-groups", (1.0, 0.9, 6), 4),
    ("dynamic:10", (1.0, 1.0, 0), 3),
]


@pytest.mark.parametrize("spec,settings,ngram_tokens", CASES)
def test_bita_samples_the_ar_distribution(drafting, ar_counts, spec, settings, ngram_tokens):
    bita, accepting = bita_counts(drafting, spec, settings, ngram_tokens)
    result = homogeneity(bita, ar_counts(settings))
    print(f"{spec} {settings} ngram {ngram_tokens}: {RUNS} + {RUNS} runs, drafts accepted in "
          f"{accepting:.0%} of tree passes: {result}")
    assert accepting > 0.1, "the accept path must be exercised"
    assert result.p_value > ALPHA and result.cells >= 20


def test_bita_samples_the_ar_distribution_past_a_sliding_window(windowed_drafting):
    """Past the window (interleaved local/global layers), BiTA samples AR's distribution. The
    greedy tests (test_greedy.py) show that a pass blind to the window fails to be lossless."""
    spec, settings, ngram_tokens = "efficient:3,2,2/chain-groups", (1.0, 1.0, 0), 4
    bita, accepting = bita_counts(windowed_drafting, spec, settings, ngram_tokens, LONG_PROMPT)
    result = homogeneity(bita, ar_counter(windowed_drafting[0], LONG_PROMPT)(settings))
    print(f"gemma3, window {WINDOW}, prompt {len(LONG_PROMPT)}: {result}")
    assert accepting > 0.1
    assert result.p_value > ALPHA and result.cells >= 20


def test_bita_with_corpus_chains_samples_the_ar_distribution(drafting, ar_counts):
    """Corpus chains (from the model's own sampled answers) beside mask drafts and n-gram chains."""
    runtime, _ = drafting
    spec, settings, ngram_tokens = "efficient:3,2,2", (1.0, 1.0, 0), 3
    answers = [emitted(ar_steps(runtime, PROMPT, StopCondition(12), Sampling(1.0, seed=seed))) for seed in range(50)]
    corpus = CorpusIndex.build([PROMPT + answer for answer in answers])
    bita, accepting = bita_counts(drafting, spec, settings, ngram_tokens, corpus=corpus)
    result = homogeneity(bita, ar_counts(settings))
    print(f"{spec} {settings} ngram and corpus {ngram_tokens}: {result}")
    assert accepting > 0.1
    assert result.p_value > ALPHA and result.cells >= 20


def fresh_per_pass(noise, tree, first):
    """Wrong: one fresh vector for each pass, every row of it racing against it."""
    vectors = {}
    return lambda row, size: vectors.setdefault(0, torch.empty(size).exponential_(1, generator=noise.generator))


def fresh_per_node(noise, tree, first):
    """Wrong: a fresh vector for each node's row, drawn when the pass starts. (Drawn only when the
    walk reaches a row it would be right: every row the walk reaches emits its winner, so the rows
    it reaches take the stream's vectors in position order.)"""
    vectors = []

    def row_noise(row, size):
        if not vectors:
            vectors.extend(torch.empty(size).exponential_(1, generator=noise.generator) for _ in range(1 + tree.size))
        return vectors[row]
    return row_noise


def test_one_vector_per_pass_fails_the_same_test(drafting, ar_counts):
    spec, settings, ngram_tokens = CASES[1]
    bita, _ = bita_counts(drafting, spec, settings, ngram_tokens, coupling=fresh_per_pass)
    result = homogeneity(bita, ar_counts(settings))
    print(f"one vector per pass, {spec} {settings}: {RUNS} + {RUNS} runs: {result}")
    assert result.p_value < 1e-6


IDENTITY_SEEDS = 6  # per setting
IDENTITY_TOKENS = 14
IDENTITY_SETTINGS = [(1.0, 1.0, 0), (0.7, 0.95, 0), (1.5, 1.0, 5), (0.4, 0.8, 3)]  # temperature, top_p, top_k
IDENTITY_SPECS = ["chain:1", "efficient:2", "efficient:3/chain-groups", "efficient:3,2,2", "full:2,2,2",
                  "dynamic:10", ""]  # '': n-gram chains alone


def identity_runs(runtime, adapter, spec, coupling=None, corpus=None, prompt=PROMPT, seeds=IDENTITY_SEEDS):
    """(runs, runs whose tokens differ from our AR loop's with the same settings and seed, the share of
    tree passes that accepted a draft) over IDENTITY_SETTINGS x ``seeds`` seeds, with n-gram chains of 3."""
    runs = differ = passes = accepting = 0
    extra = {"coupling": coupling} if coupling else {}
    decoding = Decoding(runtime, adapter, tree_of(spec),
                        chains=Chains(ngram_tokens=3, corpus=corpus, corpus_tokens=3 if corpus else 0), **extra)
    for settings in IDENTITY_SETTINGS:
        for seed in range(seeds):
            sampling = Sampling(*settings, seed=seed)
            records = list(bita_steps(replace(decoding, sampling=sampling), prompt, StopCondition(IDENTITY_TOKENS)))
            ar = emitted(ar_steps(runtime, prompt, StopCondition(IDENTITY_TOKENS), sampling))
            runs, differ = runs + 1, differ + (emitted(records) != ar)
            passes += len(records) - 1
            accepting += sum(bool(r.accepted) for r in records)
    return runs, differ, accepting / max(1, passes)


@pytest.fixture(scope="module", params=sorted(TINY_CONFIGS) + ["gemma3"])
def family_drafting(request):
    """Each tiny family over 16 tokens with drafts that land (gemma3: interleaved sliding windows)."""
    return request.param, drafting_model(with_vocab({**TINY_CONFIGS, **WINDOWED_CONFIGS}[request.param]()))


@pytest.fixture(scope="module", params=["llama", "gemma3"])
def half_drafting(request):
    """bf16 on our kernels (row-invariant passes): llama on the lean forward, gemma3 on transformers' path."""
    runtime, adapter = drafting_model(with_vocab({**TINY_CONFIGS, **WINDOWED_CONFIGS}[request.param]()))
    return request.param, (planned_tiny(request.param, torch.bfloat16, model=runtime.model), adapter)


def assert_identical_to_ar(family: str, runtime, adapter, spec: str) -> None:
    prompt = LONG_PROMPT if family == "gemma3" else PROMPT  # past the window
    runs, differ, accepting = identity_runs(runtime, adapter, spec, prompt=prompt)
    print(f"{family} {runtime.dtype} {spec}: {runs - differ}/{runs} identical, drafts accepted in {accepting:.0%} "
          "of tree passes")
    assert differ == 0 and accepting > 0.1


@pytest.mark.parametrize("spec", IDENTITY_SPECS)
def test_sampled_bita_emits_the_tokens_of_sampled_ar(family_drafting, spec):
    assert_identical_to_ar(family_drafting[0], *family_drafting[1], spec)


@pytest.mark.parametrize("spec", ["efficient:3,2,2", "dynamic:10", ""])
def test_sampled_bita_in_bf16_emits_the_tokens_of_sampled_ar(half_drafting, spec):
    """In bf16 the race compares probabilities rounded from bf16 logits: a tree row's must be the AR row's."""
    assert_identical_to_ar(half_drafting[0], *half_drafting[1], spec)


def test_bita_in_bf16_samples_the_ar_distribution(half_drafting):
    family, (runtime, adapter) = half_drafting
    spec, settings, ngram_tokens = "efficient:3,2,2/chain-groups", (1.0, 1.0, 0), 4
    prompt = LONG_PROMPT if family == "gemma3" else PROMPT
    bita, accepting = bita_counts((runtime, adapter), spec, settings, ngram_tokens, prompt)
    result = homogeneity(bita, ar_counter(runtime, prompt)(settings))
    print(f"{family} bf16: {result}")
    assert accepting > 0.1
    assert result.p_value > ALPHA and result.cells >= 20


def test_sampled_bita_with_corpus_chains_emits_the_tokens_of_sampled_ar(drafting):
    """Every draft source at once: mask drafts, n-gram chains and a corpus of the model's own sampled answers."""
    runtime, adapter = drafting
    answers = [emitted(ar_steps(runtime, PROMPT, StopCondition(12), Sampling(1.0, seed=seed))) for seed in range(50)]
    corpus = CorpusIndex.build([PROMPT + answer for answer in answers])
    runs, differ, accepting = identity_runs(runtime, adapter, "efficient:3,2,2", corpus=corpus)
    assert differ == 0 and accepting > 0.1


@pytest.mark.parametrize("coupling", [fresh_per_pass, fresh_per_node])
def test_a_wrong_coupling_fails_the_identity(drafting, coupling):
    runtime, adapter = drafting
    runs, differ, _ = identity_runs(runtime, adapter, "efficient:3,2,2", coupling)
    print(f"{coupling.__name__}: {runs - differ}/{runs} identical")
    assert differ > runs / 2


@pytest.mark.parametrize("settings", [dict(temperature=1.0), dict(temperature=0.7, top_k=20, top_p=0.9)])
def test_ar_loop_draws_what_hf_generate_draws(settings):
    """Same seed, same tokens: our warping and drawing are HF's (on the CPU)."""
    runtime = runtime_of(tiny_model("llama"))
    for seed, prompt in enumerate(random_prompts(3, seed=5)):
        sampling = Sampling(**settings, seed=seed)
        assert emitted(ar_steps(runtime, prompt, StopCondition(24), sampling)) == hf_generate(
            runtime.model, prompt, 24, [], sampling=sampling)
        assert hf_generate(runtime.model, prompt, 24, [], prompt_lookup_tokens=4, sampling=sampling)  # HF allows it


def test_same_seed_reproduces_and_other_seeds_differ(drafting):
    runtime, adapter = drafting
    decoding = Decoding(runtime, adapter, parse_tree_spec("efficient:3,2,2"))

    def bita(seed):
        return emitted(bita_steps(replace(decoding, sampling=Sampling(1.0, seed=seed)), PROMPT, StopCondition(24)))

    def ar(seed):
        return emitted(ar_steps(runtime, PROMPT, StopCondition(24), Sampling(1.0, seed=seed)))

    for run in (bita, ar):
        assert run(3) == run(3)
        assert len({tuple(run(seed)) for seed in range(4)}) == 4


def test_interleaved_requests_do_not_share_random_state(drafting):
    """Two streams advanced pass by pass in turn (two app users) give what each gives alone."""
    runtime, adapter = drafting
    decoding = Decoding(runtime, adapter, parse_tree_spec("chain:1"))

    def stream(seed):
        return bita_steps(replace(decoding, sampling=Sampling(1.0, seed=seed)), PROMPT, StopCondition(20))

    alone = [emitted(stream(seed)) for seed in (11, 12)]
    together = [[], []]
    for pair in zip_longest(stream(11), stream(12)):
        for output, record in zip(together, pair):
            output += record.emitted if record else []
        torch.rand(4)  # nor does the global generator matter
    assert together == alone


def test_greedy_is_unchanged_when_sampling_is_greedy(drafting):
    runtime, adapter = drafting
    decoding = Decoding(runtime, adapter, parse_tree_spec("full:2,2,2"))
    greedy = emitted(bita_steps(decoding, PROMPT, StopCondition(20)))
    assert emitted(bita_steps(replace(decoding, sampling=Sampling(0.0)), PROMPT, StopCondition(20))) == greedy
    assert greedy == hf_generate(runtime.model, PROMPT, 20, [])
