"""End to end on the real default model: BiTA output equals HF generate's; the shipped adapter drafts."""

import copy
from dataclasses import replace

import pytest

from bita.bench.baselines import run_hf
from bita.decode.hf_reference import hf_generate
from bita.decode.sampling import Sampling
from bita.decode.verify import walk_ranks
from bita.drafts.tree import EMPTY_TREE, parse_tree_spec
from bita.errors import BitaError
from bita.generate import Request, collect, stream_ar, stream_bita
from bita.model.loading import encode_chat
from bita.model.shipped import UNTRAINED, default_adapter_name, resolve_adapter, shipped_adapters
from bita.plan.acceptance import draft_ranks
from bita.plan.autotree import candidate_trees, pass_sample_forecasts
from bita.plan.tree_plan import DEFAULT_TREE, plan_tree

PROMPTS = [
    "Write a Python function that reverses a string.",
    "What is the capital of France? Answer in one sentence.",
    "Give three tips for staying focused while studying.",
    "Explain recursion to a ten-year-old.",
]
TREE = "efficient:3,2,2/chain-groups"  # a drafting tree, whatever ``auto`` picks on this machine


@pytest.fixture(scope="module")
def adapter(default_model):
    return resolve_adapter(default_model, None)[0]


@pytest.mark.parametrize("prompt", PROMPTS)
def test_bita_matches_hf_generate_on_chat_prompts(default_model, adapter, prompt):
    ids = encode_chat(default_model.tokenizer, [{"role": "user", "content": prompt}])
    bita = collect("bita", default_model, stream_bita(default_model, adapter, Request(ids, 48, TREE)))
    assert bita.tokens == hf_generate(default_model.model, ids, 48, default_model.eos_token_ids)
    assert bita.text.strip()


@pytest.mark.parametrize("spec", ["dynamic:12", "dynamic:24"])
def test_dynamic_trees_on_the_recalibrated_adapter_match_hf_generate(default_model, adapter, spec):
    """The shipped adapter's stored reliability builds each pass's tree; its drafts carry their chances."""
    ids = encode_chat(default_model.tokenizer, [{"role": "user", "content": PROMPTS[0]}])
    bita = collect("bita", default_model, stream_bita(default_model, adapter, Request(ids, 48, spec, drafts="masks")))
    assert bita.tokens == hf_generate(default_model.model, ids, 48, default_model.eos_token_ids)
    passes = [r for r in bita.steps if r.kind == "tree" and r.nodes]
    assert passes and all(r.rows <= int(spec.split(":")[1]) for r in passes)
    assert all(0 < n.chance <= 1 for r in passes for n in r.nodes)
    assert bita.mean_accepted > 1.2


def test_stop_strings_stop_both_loops_at_the_same_token(default_model, adapter):
    ids = encode_chat(default_model.tokenizer, [{"role": "user", "content": PROMPTS[2]}])
    stops = ("\n",)
    request = Request(ids, 64, "efficient:3,2,2", stop_strings=stops)
    bita = collect("bita", default_model, stream_bita(default_model, adapter, request))
    ar = collect("ar", default_model, stream_ar(default_model, request))
    hf = run_hf(default_model, ids, 64, stops)
    assert bita.tokens == ar.tokens == hf.tokens
    assert bita.finish == "stop" and "\n" in default_model.tokenizer.decode(bita.tokens)


def test_multi_turn_chat_is_lossless(default_model, adapter):
    messages = [{"role": "user", "content": "Name a fruit."}, {"role": "assistant", "content": "An apple."},
                {"role": "user", "content": "What colour is it usually?"}]
    ids = encode_chat(default_model.tokenizer, messages)
    bita = collect("bita", default_model, stream_bita(default_model, adapter, Request(ids, 32, "full:2,2,2")))
    assert bita.tokens == run_hf(default_model, ids, 32).tokens


@pytest.mark.parametrize("max_new_tokens,message", [(0, "from 1 to"), (-3, "from 1 to"), (10**6, "from 1 to"),
                                                    (8180, "runs past")])
def test_absurd_lengths_are_refused(default_model, adapter, max_new_tokens, message):
    ids = encode_chat(default_model.tokenizer, [{"role": "user", "content": "hi"}])
    with pytest.raises(BitaError, match=message):
        stream_bita(default_model, adapter, Request(ids, max_new_tokens, DEFAULT_TREE))


@pytest.mark.parametrize("prompt,max_new_tokens,sampling,message", [
    ("", 8, None, "the prompt is empty"), ("hi", 0, None, "from 1 to"), ("hi", -3, None, "from 1 to"),
    ("hi", 8, 0.7, "sampling must be a bita.Sampling")])
def test_an_absurd_request_is_refused_by_both_streams(default_model, adapter, prompt, max_new_tokens, sampling,
                                                      message):
    """A Request is checked when a stream is asked for: the same one-line BitaError from either."""
    ids = encode_chat(default_model.tokenizer, [{"role": "user", "content": prompt}]) if prompt else []
    request = Request(ids, max_new_tokens, sampling=sampling)
    with pytest.raises(BitaError, match=message):
        stream_bita(default_model, adapter, request)
    with pytest.raises(BitaError, match=message):
        stream_ar(default_model, request)


def test_shipped_adapter_is_the_default_and_drafts_well(default_model, adapter):
    """The adapter under assets/ loads by default, is small, records its training, and drafts:
    on a plain chat prompt it must accept more than one token per pass."""
    name = default_adapter_name(default_model)
    assert name != UNTRAINED and name in shipped_adapters()
    directory = shipped_adapters()[name]
    assert sum(f.stat().st_size for f in directory.iterdir()) < 5 * 2**20
    training = adapter.config.training
    assert training["steps"] > 0 and len(training["heldout_top1_per_depth"]) == adapter.n_masks
    ids = encode_chat(default_model.tokenizer, [{"role": "user", "content": "List five fruits, one per line."}])
    run = collect("bita", default_model, stream_bita(default_model, adapter, Request(ids, 48, TREE)))
    assert run.tokens == run_hf(default_model, ids, 48).tokens and run.mean_accepted > 1.3


def test_auto_picks_a_tree_or_plain_ar_and_stays_lossless(default_model, adapter):
    """``auto`` (the default) weighs this device's measured pass costs against the adapter's
    acceptance statistics; whichever it picks, the output is HF generate's."""
    plan = plan_tree(default_model, adapter, DEFAULT_TREE)
    assert plan.reason.startswith("auto: ") and ("no tree pays" in plan.reason) == (plan.tree is None)
    ids = encode_chat(default_model.tokenizer, [{"role": "user", "content": PROMPTS[1]}])
    run = collect("bita", default_model, stream_bita(default_model, adapter, Request(ids, 32, plan)))
    assert run.tokens == run_hf(default_model, ids, 32).tokens
    assert {r.kind for r in run.steps[1:]} <= ({"ar"} if plan.tree is None else {"tree"})


def test_auto_without_acceptance_statistics_drafts_no_masks(default_model):
    """No statistics, no forecast: masks alone decode plain AR, both keeps only the n-gram chain."""
    untrained, _ = resolve_adapter(default_model, UNTRAINED)
    masks_only = plan_tree(default_model, untrained, "auto", "masks")
    assert masks_only.tree is None and masks_only.ngram_tokens == 0
    assert "acceptance statistics" in masks_only.reason
    both = plan_tree(default_model, untrained, "auto", "both")
    assert both.tree == EMPTY_TREE and both.ngram_tokens > 0 and "acceptance statistics" in both.reason


def test_auto_plans_a_sampled_request_at_its_setting(default_model, adapter):
    """Under sampling ``auto`` forecasts every shape with the sampled walk (lower than greedy: a draft
    lands with the target's probability); an adapter calibrated without the target's distribution
    decodes plain AR under ``auto`` and says why."""
    warm = plan_tree(default_model, adapter, DEFAULT_TREE, "masks", sampling=Sampling(1.0, seed=0))
    assert "forecast at temperature 1.0" in warm.reason and warm.ranking
    # every candidate forecast both ways (not the two rankings' tops: which lead depends on this CPU's costs):
    # each static tree, and each dynamic row budget (its best depth, which may differ between the two)
    greedy = pass_sample_forecasts(adapter)
    sampled = pass_sample_forecasts(adapter, Sampling(1.0, seed=0))
    static = len(candidate_trees(adapter.n_masks))
    assert [shape for shape, _ in sampled[:static]] == [shape for shape, _ in greedy[:static]] and static > 10
    assert [shape.rows for shape, _ in sampled[static:]] == [shape.rows for shape, _ in greedy[static:]]
    assert all(hot.tokens_per_pass < cold.tokens_per_pass for (_, hot), (_, cold) in zip(sampled, greedy))
    stale = copy.copy(adapter)
    stale.config = replace(adapter.config, acceptance={key: value for key, value in adapter.config.acceptance.items()
                                                       if key != "target_sample"})
    plan = plan_tree(default_model, stale, DEFAULT_TREE, "masks", sampling=Sampling(0.7, seed=0))
    assert plan.tree is None and "predate sampled forecasts" in plan.reason


def test_acceptance_walk_predicts_every_real_pass(default_model, adapter):
    """Scoring each pass's drafts against the final output and walking the tree on those ranks
    gives exactly the number of drafts the next real pass accepted."""
    tree = parse_tree_spec("efficient:3,2,2")
    ids = encode_chat(default_model.tokenizer, [{"role": "user", "content": "Describe a sunny day in the park."}])
    records = list(stream_bita(default_model, adapter, Request(ids, 64, tree)))
    ranks = draft_ranks(records)
    pairs = [(walk_ranks(tree, r)[0], len(records[i + 1].accepted)) for i, r in ranks.items() if i + 1 < len(records)]
    assert len(pairs) >= len(records) - 4 and all(p == a for p, a in pairs)


@pytest.mark.parametrize("sampling", [None, Sampling(temperature=0.7, top_p=0.95, seed=0)], ids=["greedy", "sampled"])
def test_the_walk_on_the_device_is_lossless_on_the_real_model(default_model, adapter, sampling, monkeypatch):
    """The GPU's verification (tensor operations, one copy back a pass: bita/decode/device_walk.py), run on a
    CPU: our AR loop's tokens, greedy and sampled, with drafts accepted along the way."""
    from bita.decode import pass_logits

    monkeypatch.setattr(pass_logits, "on_device", lambda device: True)
    monkeypatch.setattr(pass_logits, "one_head_call", lambda device, rows: True)  # as on a GPU
    ids = encode_chat(default_model.tokenizer, [{"role": "user", "content": PROMPTS[0]}])
    request = Request(ids, 48, TREE, sampling=sampling)
    bita = collect("bita", default_model, stream_bita(default_model, adapter, request))
    assert bita.tokens == collect("ar", default_model, stream_ar(default_model, request)).tokens
    assert bita.forward_passes < len(bita.tokens)
