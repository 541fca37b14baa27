"""HF ``generate`` as a timed, validated run beside BiTA's: the baseline a user would run, the same
with a static cache (compiled by ``generate`` on a GPU), the same in float32 on a float32 copy of the
model (what a user runs by default on a CPU, and the reference a half-precision run is compared
with), HF prompt lookup decoding (a draft-free peer), and BiTA itself inside ``generate``
(``custom_generate``, bita/hf.py)."""

from __future__ import annotations

import torch

from ..decode.hf_reference import hf_generate, sampling_config
from ..decode.sampling import Sampling
from ..decode.stopping import make_stop
from ..generate import RunResult, check_sampling, validate_request
from ..hf import generate as bita_in_generate
from ..model.adapter import BitaAdapter
from ..model.loading import DEFAULT_MODEL, DEFAULT_NAME, LoadedModel, load_model
from ..plan.tree_plan import TreePlan
from ..runtime.device import timed


def run_hf(loaded: LoadedModel, prompt_ids: list[int], max_new_tokens: int,
           stop_strings: tuple[str, ...] = (), prompt_lookup_tokens: int | None = None,
           sampling: Sampling | None = None, static_cache: bool = False) -> RunResult:
    """HF ``generate`` (the reference baseline; with ``prompt_lookup_tokens``, HF prompt lookup
    decoding, method "pld"; with ``static_cache``, a static cache, torch.compile'd on a GPU, method
    "hfs"), greedy or sampled (seeding torch's global generators, see ``hf_generate``), cut at stop
    strings like the other loops."""
    sampling = check_sampling(sampling)
    validate_request(loaded, prompt_ids, max_new_tokens)
    stop = make_stop(loaded, max_new_tokens, stop_strings)
    generated, seconds = timed(loaded.device, lambda: hf_generate(
        loaded.model, prompt_ids, max_new_tokens, loaded.eos_token_ids, prompt_lookup_tokens, sampling,
        tuple(stop.stop_strings), loaded.tokenizer, static_cache))
    tokens, finish = stop.take(generated)
    return RunResult("pld" if prompt_lookup_tokens else "hfs" if static_cache else "hf", tokens,
                     loaded.tokenizer.decode(tokens, skip_special_tokens=True), seconds, finish)


_float32_twins: dict[int, LoadedModel] = {}  # id(loaded.model) -> its float32 copy, loaded once a process


def float32_twin(loaded: LoadedModel) -> LoadedModel:
    """``loaded`` itself where its weights are float32, else the same model loaded again in float32 on
    the stock kernels (once a process): HF generate's float32 reference beside a half-precision run."""
    if loaded.model.dtype == torch.float32:
        return loaded
    key = id(loaded.model)
    if key not in _float32_twins:
        name = DEFAULT_MODEL if loaded.name == DEFAULT_NAME else loaded.name
        _float32_twins[key] = load_model(name, str(loaded.device), "float32", kernels="stock")
    return _float32_twins[key]


def run_custom_generate(loaded: LoadedModel, adapter: BitaAdapter, plan: TreePlan, prompt_ids: list[int],
                        max_new_tokens: int, sampling: Sampling | None = None) -> RunResult:
    """BiTA through transformers' ``generate`` (``custom_generate=bita.hf.generate``, with ``plan``'s
    tree, on the loaded model's kernels as ``bita`` runs): method "hfc", what ``generate`` adds to
    a BiTA run. Sampled, torch's global generator is seeded with ``sampling.seed`` (bita.hf draws its
    own seed from it). Not under inference mode, as ``bita`` runs: the lean forward's pooled KV buffers
    made in inference mode could not be written outside it later."""
    sampling = check_sampling(sampling)
    validate_request(loaded, prompt_ids, max_new_tokens, extra_rows=plan.extra_rows)
    config = sampling_config(max_new_tokens, loaded.eos_token_ids, sampling)
    ids = torch.tensor([prompt_ids], device=loaded.device)
    if not sampling.greedy:
        torch.manual_seed(sampling.seed)
    output, seconds = timed(loaded.device, lambda: loaded.model.generate(
        ids, generation_config=config, custom_generate=bita_in_generate, adapter=adapter, tree=plan))
    tokens, finish = make_stop(loaded, max_new_tokens).take(output[0, len(prompt_ids):].tolist())
    return RunResult("hfc", tokens, loaded.tokenizer.decode(tokens, skip_special_tokens=True), seconds, finish)
