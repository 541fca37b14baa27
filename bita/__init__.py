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

from . import hf  # bita.hf.generate: BiTA inside model.generate (custom_generate)
from .bench.baselines import run_hf
from .decode.records import StepRecord
from .decode.sampling import Sampling
from .drafts.tree import parse_tree_spec
from .errors import BitaError
from .generate import Request, RunResult, collect, stream_ar, stream_bita
from .model.adapter import BitaAdapter
from .model.loading import encode_chat, load_model
from .model.shipped import resolve_adapter
from .plan.tree_plan import TreePlan, plan_tree

__all__ = ["__version__", "hf", "BitaAdapter", "BitaError", "Request", "RunResult", "Sampling", "StepRecord",
           "TreePlan", "collect", "encode_chat", "load_model", "parse_tree_spec", "plan_tree", "resolve_adapter",
           "run_hf", "stream_ar", "stream_bita"]
