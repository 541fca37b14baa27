"""Prompt suites and the side-by-side bench (real default model, a few short prompts)."""

import json
from collections import Counter

import pytest

from bita.bench.suites import humaneval, load_prompts, mt_bench
from bita.cli import main
from bita.errors import BitaError


def test_packaged_suites_are_complete():
    questions = mt_bench()
    assert len(questions) == 80 and set(Counter(q.category for q in questions).values()) == {10}
    problems = humaneval()
    assert len(problems) == 164 and "def has_close_elements" in problems[0].messages[0]["content"]
    both = load_prompts("all", limit=3)
    assert [p.id for p in both] == ["mt-bench/81", "mt-bench/82", "mt-bench/83", "HumanEval/0", "HumanEval/1",
                                    "HumanEval/2"]
    sampled = load_prompts("all", per_category=2)
    assert len(sampled) == 18 and Counter(p.category for p in sampled)["humaneval"] == 2
    long = load_prompts("long-context")
    assert len(long) == 12 and all(450 <= len(p.messages[0]["content"].split()) - 7 <= 1100 for p in long)


@pytest.mark.parametrize("line,message", [
    ("{not json", "not JSON"),
    ('{"prompt": "   "}', "non-empty"),
    ('{"messages": [{"role": "assistant", "content": "hi"}]}', "ending with a user turn"),
])
def test_bad_prompt_files_are_refused(tmp_path, line, message):
    path = tmp_path / "prompts.jsonl"
    path.write_text('{"prompt": "fine"}\n' + line + "\n")
    with pytest.raises(BitaError, match=message):
        load_prompts(prompts_file=str(path))
    with pytest.raises(BitaError, match="no prompts file"):
        load_prompts(prompts_file=str(tmp_path / "missing.jsonl"))


def test_bench_reports_side_by_side(tmp_path, capsys, default_model):
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(json.dumps({"id": "a", "category": "chat", "prompt": "Name three colours."}) + "\n"
                       + json.dumps({"messages": [{"role": "user", "content": "What is 2+2?"}]}) + "\n")
    report_path, table_path, page = tmp_path / "bench.json", tmp_path / "bench.md", tmp_path / "bench.html"
    # float32: HF generate's transformers forward and our lean forward agree on every CPU kind (in bfloat16 their
    # roundings differ, and whether auto takes bfloat16 depends on this machine's timings)
    code = main(["bench", "--prompts", str(prompts), "--max-new-tokens", "12", "--tree", "efficient:2,2,1",
                 "--dtype", "float32", "--json-out", str(report_path), "--markdown", str(table_path), "--html", str(page)])
    assert code == 0, capsys.readouterr().err
    report = json.loads(report_path.read_text())
    summary = report["summary"]
    runtime, key = report["setup"]["runtime"], report["setup"]["runtime_key"]
    assert runtime.startswith("lean forward, static KV cache") and "; linears layers " in runtime
    assert "|lean" in key and "|linears layers " in key and " ms" not in key
    assert report["setup"]["methods"] == ["hf", "ar", "pld", "bita"]
    assert summary["identical"] == summary["total"] == 2 and summary["tree"] == "efficient:2,2,1+ngram:4"
    assert summary["drafts"] == "both"
    assert summary["reference"] == "our AR loop" and summary["baseline"] == "HF generate"
    assert summary["mean_accepted"] >= 1 and set(summary["speedup_vs"]) == {"hf", "ar", "pld"}
    assert summary["speedup"] == summary["speedup_vs"]["hf"] > 0
    assert all(0 < low <= high for low, high in summary["speedup_spread"].values())
    assert all(rate > 0 for rate in summary["tokens_per_s"].values())
    assert set(report["categories"]) == {"chat", "prompts"}
    first = report["prompts"][0]
    assert first["id"] == "a" and set(first["seconds"]) == {"hf", "ar", "pld", "bita"}
    assert first["tokens"]["hf"] == first["tokens"]["ar"] == first["tokens"]["pld"] == first["new_tokens"]
    table = table_path.read_text()
    assert "| **all** | 2 |" in table and all(f"vs {name}" in table for name in ("HF generate", "our AR loop",
                                                                                  "HF prompt lookup"))
    assert "Prompts whose tokens equal BiTA's: HF generate 2/2, our AR loop 2/2, HF prompt lookup 2/2." in table
    figures = page.read_text()
    titles = ("Speedup per category", "Tokens per forward pass", "Cost of one forward pass")
    assert all(title in figures for title in titles)


def test_sampled_bench_checks_identity_with_our_ar_loop(tmp_path, capsys, default_model):
    """Sampled with one seed, BiTA emits our AR loop's tokens, and the bench counts it as for greedy."""
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(json.dumps({"id": "a", "category": "chat", "prompt": "Name three colours."}) + "\n")
    report_path, table_path = tmp_path / "bench.json", tmp_path / "bench.md"
    code = main(["bench", "--prompts", str(prompts), "--max-new-tokens", "12", "--tree", "chain:2",
                 "--methods", "ar,pld,hfc,bita", "--temperature", "0.7", "--top-k", "40", "--seed", "3",
                 "--json-out", str(report_path), "--markdown", str(table_path)])
    assert code == 0, capsys.readouterr().err
    report = json.loads(report_path.read_text())
    assert report["setup"]["sampling"] == {"temperature": 0.7, "top_p": 1.0, "top_k": 40, "seed": 3}
    assert report["summary"]["identical"] == 1 and report["prompts"][0]["identical"] is True
    assert report["summary"]["reference"] == "our AR loop" and report["prompts"][0]["same_as_bita"]["ar"]
    assert report["summary"]["mean_accepted"] >= 1 and all(r > 0 for r in report["summary"]["tokens_per_s"].values())
    table = table_path.read_text()
    assert "identical to our AR loop" in table and "Sampled (temperature 0.7, top-p 1, top-k 40, seed 3;" in table
    assert "| **all** | 1 |" in table and "our AR loop 1/1" in table


def test_hf_methods_run_on_stock_kernels(default_model, monkeypatch):
    """HF generate and prompt lookup time what users run today, on the same loaded model."""
    import bita.bench.report
    from bita.plan.tree_plan import TreePlan

    seen = []
    monkeypatch.setattr(bita.bench.report, "run_hf", lambda loaded, *args, **kwargs: seen.append(
        ("forward" in vars(loaded.model.lm_head), kwargs["prompt_lookup_tokens"], kwargs["static_cache"])))
    for method in ("hf", "hfs", "pld"):
        bita.bench.report.run_method(method, default_model, None, TreePlan(None, "plain AR"), [1, 2], 4)
    assert seen == [(False, None, False), (False, None, True), (False, bita.bench.report.PLD_TOKENS, False)]
    assert "forward" in vars(default_model.model.lm_head), "the fast path is back afterwards"


def test_hf_generate_with_a_static_cache_gives_the_same_greedy_tokens():
    """The static-cache baseline (compiled by generate on a GPU; eager here) decodes what HF generate does."""
    from conftest import random_prompts, tiny_model

    from bita.decode.hf_reference import hf_generate

    model = tiny_model("llama")
    for prompt in random_prompts(2, seed=11):
        assert hf_generate(model, prompt, 12, [], static_cache=True) == hf_generate(model, prompt, 12, [])


def test_bench_refuses_a_run_without_baseline(capsys):
    assert main(["bench", "--limit", "1", "--methods", "bita"]) == 2
    assert "baseline" in capsys.readouterr().err


def test_bita_inside_hf_generate_is_a_method_of_its_own(default_model):
    """``hfc``: BiTA through ``model.generate(custom_generate=bita.hf.generate)``, timed beside ``bita``
    and giving its tokens."""
    from bita.bench.report import run_method
    from bita.model.loading import encode_chat
    from bita.model.shipped import resolve_adapter
    from bita.plan.tree_plan import plan_tree

    adapter, _ = resolve_adapter(default_model, None)
    plan = plan_tree(default_model, adapter, "efficient:2,1")
    ids = encode_chat(default_model.tokenizer, [{"role": "user", "content": "Name three colours."}])
    inside, alone = (run_method(m, default_model, adapter, plan, ids, 24) for m in ("hfc", "bita"))
    assert inside.method == "hfc" and inside.tokens == alone.tokens and inside.seconds > 0


def test_a_half_precision_bench_reports_agreement_with_hf_generate_in_fp32(tmp_path, capsys, default_model):
    """``hf32``: HF generate on a float32 copy beside a bf16 run, timed as a baseline, its tokens compared
    with BiTA's, and where they part the fp32 pass's top-2 gap judged against bf16 rounding."""
    from bita.bench.baselines import float32_twin

    assert float32_twin(default_model) is default_model  # already float32: no copy
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(json.dumps({"id": "a", "category": "chat", "prompt": "Name three colours."}) + "\n")
    report_path, table_path = tmp_path / "bench.json", tmp_path / "bench.md"
    code = main(["bench", "--prompts", str(prompts), "--max-new-tokens", "12", "--tree", "chain:2", "--dtype",
                 "bfloat16", "--methods", "hf32,ar,bita", "--json-out", str(report_path), "--markdown",
                 str(table_path)])
    assert code == 0, capsys.readouterr().err
    report = json.loads(report_path.read_text())
    first, summary = report["prompts"][0], report["summary"]
    assert report["setup"]["dtype"] == "torch.bfloat16" and set(first["seconds"]) == {"hf32", "ar", "bita"}
    assert set(summary["speedup_vs"]) == {"hf32", "ar"} and summary["same_as_bita"]["hf32"] in (0, 1)
    parted = first["divergence_fp32"]
    assert (parted is None) == first["same_as_bita"]["hf32"]
    if parted:
        assert parted["position"] >= 0 and parted["gap"] >= 0 and parted["rounding"] > 1e-3  # bf16's, not fp32's
    assert "HF generate fp32 tok/s" in table_path.read_text()


def test_our_ar_loop_at_its_fastest_shapes_runs_where_invariance_costs_it(default_model, caplog):
    """``arf``: left out with one line where the runtime is at its fastest shapes already (a CPU); on row-invariant
    padded passes (run eagerly here on a tiny model, as a GPU runs them) it runs the fastest shapes' forward,
    which shares the lean forward, and decodes our AR loop's greedy tokens."""
    import logging

    from conftest import random_prompts, tiny_model

    from bita.bench.report import run_method, runnable
    from bita.model.loading import LoadedModel
    from bita.plan.tree_plan import TreePlan
    from bita.runtime.lean_llama import LeanLlama
    from bita.runtime.padded import PaddedLean, one_shape
    from bita.runtime.runtime import Runtime

    with caplog.at_level(logging.WARNING):
        assert runnable(("ar", "arf", "bita"), default_model) == ("ar", "bita")
    assert "the bench runs without our AR loop, fastest shapes: our AR loop runs at its fastest shapes" in caplog.text
    model = tiny_model("llama")
    invariant = PaddedLean(LeanLlama(model), one_shape(8), graphs=False)
    loaded = LoadedModel(model, default_model.tokenizer, "tiny-llama", Runtime(model, invariant))  # ids < 512
    assert runnable(("ar", "arf", "bita"), loaded) == ("ar", "arf", "bita")
    prompt, plan = random_prompts(1, seed=4)[0], TreePlan(None, "plain AR")
    ar, fastest = (run_method(method, loaded, None, plan, prompt, 10) for method in ("ar", "arf"))
    assert fastest.method == "arf" and fastest.tokens == ar.tokens and len(ar.tokens) == 10
