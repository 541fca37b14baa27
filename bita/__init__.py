"""BiTA: bi-directional tuning for lossless acceleration of a frozen causal LM.

What a library user calls::

    loaded = bita.load_model()                           # the embedded SmolLM2-135M-Instruct, or any HF causal LM
    adapter, name = bita.resolve_adapter(loaded, None)   # the shipped adapter for it
    ids = bita.encode_chat(loaded.tokenizer, [{"role": "user", "content": "Hi"}])
    request = bita.Request(ids, max_new_tokens=64)       # tree "auto", greedy: see bita.Request
    for record in bita.stream_bita(loaded, adapter, request):  # one StepRecord per forward pass
        print(loaded.tokenizer.decode(record.emitted), end="")

The sub-packages are the data path, in the order a pass flows through them: ``runtime`` (how a pass
runs here: forwards, caches, kernels, the row-invariance proof) -> ``model`` (load, adapter) ->
``drafts`` (tree shapes, n-grams, the trie) -> ``decode`` (masks, one forward pass, verification,
records) -> ``plan`` (which tree pays here) -> ``generate`` (validated streams) -> ``bench`` /
``serve`` / ``cli``; ``training`` makes adapters.
"""

__version__ = "0.1.0"

import importlib

# What each public name is imported from, on first use: ``import bita`` pays for no part it does not use (bita.hf
# imports transformers' generation machinery; the bench and the plans their own).
_EXPORTS = {"hf": ".hf", "run_hf": ".bench.baselines", "StepRecord": ".decode.records", "Sampling": ".decode.sampling",
            "parse_tree_spec": ".drafts.tree", "BitaError": ".errors", "Request": ".generate",
            "RunResult": ".generate", "collect": ".generate", "stream_ar": ".generate", "stream_bita": ".generate",
            "BitaAdapter": ".model.adapter", "encode_chat": ".model.loading", "load_model": ".model.loading",
            "resolve_adapter": ".model.shipped", "TreePlan": ".plan.tree_plan", "plan_tree": ".plan.tree_plan",
            "show": ".notebook", "SavedDecoding": ".saved", "read_saved": ".saved"}

__all__ = ["__version__", *sorted(_EXPORTS)]


def __getattr__(name: str):
    """``bita.NAME`` for the public names, imported where first asked for (PEP 562)."""
    if name not in _EXPORTS:
        raise AttributeError(f"module 'bita' has no attribute {name!r}")
    module = importlib.import_module(_EXPORTS[name], __name__)
    value = module if name == "hf" else getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
