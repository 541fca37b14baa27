"""The reference AR decoder: transformers' own ``generate``, greedy or sampled with exactly our settings."""

from __future__ import annotations

from functools import lru_cache

import torch
from torch import nn
from transformers import GenerationConfig, StoppingCriteriaList, StopStringCriteria

from ..runtime.device import device_of
from .sampling import GREEDY, Sampling


def greedy_config(max_new_tokens: int, eos_token_ids: list[int]) -> GenerationConfig:
    """A fresh greedy config: no sampling or penalties inherited from the model's defaults."""
    return GenerationConfig(max_new_tokens=max_new_tokens, do_sample=False, num_beams=1,
                            eos_token_id=eos_token_ids or None, pad_token_id=eos_token_ids[0] if eos_token_ids else 0)


def sampling_config(max_new_tokens: int, eos_token_ids: list[int], sampling: Sampling) -> GenerationConfig:
    """``greedy_config``, or for a sampling ``sampling`` HF's multinomial sampling with exactly its
    temperature, top-k and top-p. Every other sampling warper and the repetition penalty are set
    neutral explicitly: generate fills unset (None) fields from the model's generation config."""
    config = greedy_config(max_new_tokens, eos_token_ids)
    if not sampling.greedy:
        config.update(do_sample=True, temperature=float(sampling.temperature), top_k=sampling.top_k,
                      top_p=float(sampling.top_p), typical_p=1.0, epsilon_cutoff=0.0, eta_cutoff=0.0,
                      repetition_penalty=1.0)
    return config


STATIC_CACHE_SLOTS = 2048


@lru_cache(maxsize=16)
def stop_string_criteria(tokenizer, stop_strings: tuple[str, ...]) -> StoppingCriteriaList:
    """HF's own stop-string criterion, made once per tokenizer and strings: making it reads the whole
    vocabulary (3.5 s per ``generate`` call for Gemma 3's 262,144 tokens on a 2-vCPU EPYC), which would
    otherwise be timed as part of every HF run."""
    return StoppingCriteriaList([StopStringCriteria(tokenizer, list(stop_strings))])


@torch.inference_mode()
def hf_generate(model: nn.Module, prompt_ids: list[int], max_new_tokens: int, eos_token_ids: list[int],
                prompt_lookup_tokens: int | None = None, sampling: Sampling = GREEDY,
                stop_strings: tuple[str, ...] = (), tokenizer=None, static_cache: bool = False) -> list[int]:
    """The reference: transformers' ``generate`` with its KV cache, greedy or sampled. Returns new tokens.

    ``prompt_lookup_tokens``: HF prompt lookup decoding, proposing that many tokens a pass
    (copied from where the last n-gram, up to 2 tokens, occurred before in prompt and output);
    with sampling it draws every verified position from the warped target distribution and
    keeps the drafts up to the first one that differs from its draw, which is exact for
    deterministic drafts. ``generate`` takes no generator: a sampled call seeds torch's global
    generators with ``torch.manual_seed(sampling.seed)`` (a side effect on the process's global
    random state); on the CPU it then draws what our AR loop draws with the same seed.
    ``stop_strings`` (with ``tokenizer``): end where one of them completes. ``static_cache``: a
    static KV cache of at least STATIC_CACHE_SLOTS slots (one size for most requests), which
    ``generate`` compiles with torch.compile on a GPU: what a GPU user would otherwise run.
    """
    input_ids = torch.tensor([prompt_ids], device=device_of(model))
    config = sampling_config(max_new_tokens, eos_token_ids, sampling)
    config.prompt_lookup_num_tokens = prompt_lookup_tokens
    if static_cache:
        config.update(cache_implementation="static", max_cache_len=max(STATIC_CACHE_SLOTS,
                                                                      len(prompt_ids) + max_new_tokens))
    if not sampling.greedy:
        torch.manual_seed(sampling.seed)
    stopping = stop_string_criteria(tokenizer, tuple(stop_strings)) if stop_strings else None
    output = model.generate(input_ids, attention_mask=torch.ones_like(input_ids), generation_config=config,
                            stopping_criteria=stopping)
    return output[0, len(prompt_ids):].tolist()
