"""A real BiTA decoding of a tiny random model, every record kept (attention masks, verdicts), and our AR loop's of the
same request, for the tests of saved decodings and their playback: no tokenizer needed (token i reads ' wI', a multiple
of 7 a newline)."""

from __future__ import annotations

from dataclasses import replace
from functools import cache

from conftest import VOCAB, tiny_model

from bita.decode.stopping import StopCondition
from bita.generate import Request, RunResult, collect, stream_ar, stream_bita
from bita.model.adapter import BitaAdapter
from bita.model.loading import LoadedModel
from bita.runtime.runtime import runtime_of

PROMPT = [5, 6, 7, 8, 9, 10, 5, 6, 7]
NEW_TOKENS = 24


class Words:
    """A tokenizer's ``decode`` and length for a tiny model's ids."""

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return "".join("\n" if i % 7 == 0 else f" w{i}" for i in ids)

    def __len__(self) -> int:
        return VOCAB


def tiny_loaded(seed: int = 0) -> LoadedModel:
    model = tiny_model("llama", seed)
    return LoadedModel(model, Words(), f"tiny-llama-{seed}", runtime_of(model))


@cache
def tiny_decoding() -> tuple[LoadedModel, BitaAdapter, Request, RunResult]:
    """(model, adapter, request, run): BiTA with a random adapter, mask drafts and n-gram chains, 24 tokens."""
    loaded = tiny_loaded()
    adapter = BitaAdapter.create(loaded.model, prompt_tokens=4, mask_tokens=3, seed=1)
    request = Request(PROMPT, NEW_TOKENS, "efficient:3,2,1", drafts="both", ngram_tokens=3,
                      stop=StopCondition(NEW_TOKENS), record_attention=True, record_verdicts=True)
    return loaded, adapter, request, collect("bita", loaded, stream_bita(loaded, adapter, request))


@cache
def tiny_ar_decoding() -> RunResult:
    """Our AR loop's run of ``tiny_decoding``'s request on its model (a stop condition of its own): one pass a token."""
    loaded, _, request, _ = tiny_decoding()
    return collect("ar", loaded, stream_ar(loaded, replace(request, stop=StopCondition(NEW_TOKENS))))
