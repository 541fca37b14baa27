"""HF ``generate`` as a timed, validated run beside BiTA's: the baseline a user would run, the same
with a static cache (compiled by ``generate`` on a GPU), and HF prompt lookup decoding (a
draft-free peer)."""

from __future__ import annotations

from ..decode.hf_reference import hf_generate
from ..decode.sampling import Sampling
from ..decode.stopping import make_stop
from ..generate import RunResult, check_sampling, validate_request
from ..model.device import device_of, timed
from ..model.loading import LoadedModel


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
    generated, seconds = timed(device_of(loaded.model), lambda: hf_generate(
        loaded.model, prompt_ids, max_new_tokens, loaded.eos_token_ids, prompt_lookup_tokens, sampling,
        tuple(stop.stop_strings), loaded.tokenizer, static_cache))
    tokens, finish = stop.take(generated)
    return RunResult("pld" if prompt_lookup_tokens else "hfs" if static_cache else "hf", tokens,
                     loaded.tokenizer.decode(tokens, skip_special_tokens=True), seconds, finish)
