"""BiTA inside transformers' ``model.generate``: a decoding method for its ``custom_generate``.

Two ways in, both decoding with ``bita.stream_bita`` on the model ``generate`` was called on::

    out = model.generate(**inputs, custom_generate=bita.hf.generate, adapter=adapter, tree="auto")
    out = model.generate(**inputs, custom_generate="USER/REPO", trust_remote_code=True, adapter=...)

The first passes this module's ``generate``; transformers prepares the request (generation config,
logits processors, stopping criteria, the length) and calls it with the keywords its signature names
beyond ``GenerationMixin._sample``'s: ``adapter``, ``tree``, ``drafts``, ``ngram_tokens``,
``bita_streamer``. transformers hands such a callable no ``streamer``: pass a ``TextStreamer`` as
``bita_streamer``. The second loads ``custom_generate/generate.py`` from a Hub repository (the
recipe folder at this repository's root), which calls ``generate_from_hub``: there ``streamer``
works as in any ``generate`` call.

Greedy output is token for token plain ``generate``'s (fp32); ``do_sample=True`` samples through the
lossless path from exactly the distribution ``generate`` samples from, with BiTA's own random
stream, seeded from torch's global generator (``torch.manual_seed`` reproduces a run). A setting BiTA
cannot keep lossless is refused in one line (``UnsupportedGeneration``): a logits processor other than
temperature, top-k and top-p, a stopping criterion other than the length and EOS, a batch above one
row, padding, beams, scores or other per-step outputs.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import (GenerationConfig, LogitsProcessorList, StoppingCriteriaList, TemperatureLogitsWarper,
                          TopKLogitsWarper, TopPLogitsWarper)
from transformers.generation import EosTokenCriteria, MaxLengthCriteria
from transformers.generation.utils import GenerateDecoderOnlyOutput

from .decode.sampling import DRAWN_SEEDS, GREEDY, Sampling
from .decode.stopping import StopCondition
from .drafts.sources import DEFAULT_DRAFTS
from .errors import BitaError
from .generate import Request, stream_bita
from .model.adapter import BitaAdapter
from .model.loading import LoadedModel
from .model.shipped import resolve_adapter
from .plan.tree_plan import DEFAULT_NGRAM_TOKENS, DEFAULT_TREE
from .runtime.runtime import runtime_of

WARPERS = (TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper)
STOPS = (MaxLengthCriteria, EosTokenCriteria)
PER_STEP_OUTPUTS = ("output_scores", "output_logits", "output_attentions", "output_hidden_states")


class UnsupportedGeneration(BitaError, ValueError):
    """A ``generate`` setting that BiTA cannot keep lossless, or cannot give."""


def generate(model: nn.Module, input_ids: torch.LongTensor, logits_processor: LogitsProcessorList,
             stopping_criteria: StoppingCriteriaList, generation_config: GenerationConfig,
             adapter: BitaAdapter | str | None = None, tree: str = DEFAULT_TREE, drafts: str = DEFAULT_DRAFTS,
             ngram_tokens: int = DEFAULT_NGRAM_TOKENS, bita_streamer=None,
             **model_kwargs) -> torch.LongTensor | GenerateDecoderOnlyOutput:
    """BiTA as ``generate``'s decoding method (``custom_generate=bita.hf.generate``).

    input_ids: [1, T] the prompt; returns [1, T + new] (or a ``GenerateDecoderOnlyOutput`` holding
    it, with ``return_dict_in_generate``). ``adapter``: a BitaAdapter, a shipped adapter's name, a
    folder, a Hub repository ``USER/NAME``, or None: the shipped adapter made for these weights, else
    an untrained one (lossless, drafting poorly). ``tree``, ``drafts``, ``ngram_tokens``: as a
    ``bita.Request`` holds them (``drafts="all"`` needs the tokenizer, which ``generate`` does not
    pass on). ``bita_streamer``: a streamer (``TextStreamer``), given the prompt and then each pass's
    tokens. ``model_kwargs``: what ``generate`` prepared for its own loop (unused but for padding).
    Keywords, not a ``bita.Request``: ``custom_generate`` calls its method with the keyword arguments
    of the ``generate`` call; this builds the Request (the prompt, the length and stop, the sampling
    that ``generate`` prepared) and decodes it with ``bita.stream_bita``.
    """
    check_request(input_ids, stopping_criteria, generation_config, model_kwargs.get("attention_mask"), drafts)
    sampling = sampling_of(logits_processor, generation_config)
    loaded = LoadedModel(model, None, str(getattr(model, "name_or_path", "") or model.config.model_type),
                         runtime_of(model))
    if not isinstance(adapter, BitaAdapter):
        adapter, _ = resolve_adapter(loaded, adapter)
    prompt_ids = input_ids[0].tolist()
    max_new_tokens = generation_config.max_length - len(prompt_ids)
    eos = generation_config._eos_token_tensor
    stop = StopCondition(max_new_tokens, [] if eos is None else eos.flatten().tolist())
    if bita_streamer is not None:
        bita_streamer.put(input_ids.cpu())
    tokens = []
    request = Request(prompt_ids, max_new_tokens, tree, drafts, ngram_tokens, sampling=sampling, stop=stop)
    for record in stream_bita(loaded, adapter, request):
        tokens.extend(record.emitted)
        if bita_streamer is not None and record.emitted:
            bita_streamer.put(torch.tensor(record.emitted))
    if bita_streamer is not None:
        bita_streamer.end()
    sequences = torch.cat([input_ids, torch.tensor([tokens], dtype=input_ids.dtype, device=input_ids.device)], 1)
    return GenerateDecoderOnlyOutput(sequences=sequences) if generation_config.return_dict_in_generate else sequences


def generate_from_hub(model: nn.Module, streamer=None, **arguments) -> torch.LongTensor | GenerateDecoderOnlyOutput:
    """What a Hub repository's ``custom_generate/generate.py`` runs: ``generate`` hands it every
    argument of the call (``model``, ``streamer``, ``inputs``, ``adapter``, ...); it runs the call
    again with ``generate`` above as the decoding method and the streamer as ``bita_streamer``."""
    return model.generate(custom_generate=generate, bita_streamer=streamer, **arguments)


def check_request(input_ids: torch.Tensor, stopping_criteria: StoppingCriteriaList,
                  generation_config: GenerationConfig, attention_mask: torch.Tensor | None, drafts: str) -> None:
    """UnsupportedGeneration for a request BiTA cannot serve losslessly (see the module docstring)."""
    if input_ids.shape[0] != 1:
        raise UnsupportedGeneration(f"BiTA decodes one sequence at a time, not a batch of {input_ids.shape[0]} "
                                    "(num_beams and num_return_sequences must be 1)")
    if attention_mask is not None and not bool(attention_mask.all()):
        raise UnsupportedGeneration("BiTA decodes unpadded prompts: the attention mask holds padding")
    if generation_config.num_beams != 1:
        raise UnsupportedGeneration("BiTA does not do beam search: num_beams must be 1")
    asked = [name for name in PER_STEP_OUTPUTS if getattr(generation_config, name, False)]
    if asked:
        raise UnsupportedGeneration(f"BiTA returns the sequences only, not {', '.join(asked)}")
    others = [type(c).__name__ for c in stopping_criteria if not isinstance(c, STOPS)]
    if others:
        raise UnsupportedGeneration(f"BiTA stops at the length and EOS only, not by {', '.join(others)}")
    if drafts == "all":
        raise UnsupportedGeneration("drafts='all' needs the tokenizer, which generate does not pass on: use "
                                    "bita.stream_bita, or drafts='both'")


def sampling_of(logits_processor: LogitsProcessorList, generation_config: GenerationConfig) -> Sampling:
    """The Sampling that ``generate``'s prepared processors stand for: greedy without ``do_sample``,
    else the temperature, top-k and top-p of its warpers; UnsupportedGeneration for any other
    processor (a repetition penalty, a minimum length, min-p, bad words, ...), which would change
    the distribution row by row in ways the tree's rows cannot follow."""
    others = [type(p).__name__ for p in logits_processor if not isinstance(p, WARPERS)]
    if others:
        raise UnsupportedGeneration(f"BiTA keeps output lossless with temperature, top-k and top-p only, not with "
                                    f"{', '.join(others)}")
    if not generation_config.do_sample:
        return GREEDY
    settings = {"temperature": 1.0, "top_k": 0, "top_p": 1.0}
    for warper in logits_processor:
        if getattr(warper, "min_tokens_to_keep", 1) != 1:
            raise UnsupportedGeneration("BiTA samples with min_tokens_to_keep=1 only")
        if isinstance(warper, TemperatureLogitsWarper):
            settings["temperature"] = float(warper.temperature)
        elif isinstance(warper, TopKLogitsWarper):
            settings["top_k"] = int(warper.top_k)
        else:
            settings["top_p"] = float(warper.top_p)
    seed = int(torch.randint(DRAWN_SEEDS, ()))  # torch's global generator: torch.manual_seed reproduces the run
    return Sampling(**settings, seed=seed)
