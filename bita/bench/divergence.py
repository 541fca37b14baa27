"""Where two greedy outputs part, and whether the reference was at a near tie there.

In fp32 BiTA's greedy output equals AR's token for token (tests/lossless/). In bf16 or fp16 it need
not: a tree pass and an AR pass multiply different matrix shapes, rounding differs, and where the
two best logits are within rounding of each other the argmax may flip. So a half-precision run
reports, for each output that differs from the reference, the first differing position and the
reference's top-2 logit gap there, next to the gap that rounding alone can close: a divergence at
a gap below that is a near tie, one above it a bug (the rule, shared with the app's and the CLI's
verdicts, is bita/decode/explain.py's).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..decode.explain import near_tie, rounding_gap
from ..decode.verify import shared_prefix
from ..model.loading import LoadedModel


@dataclass(frozen=True)
class Divergence:
    position: int  # index of the first new token that differs
    gap: float  # the reference's top-1 minus top-2 logit there (fp32 read of the model's own-dtype pass)
    rounding: float  # the gap rounding may close in the model's dtype at the top logit (``rounding_gap``)

    @property
    def near_tie(self) -> bool:
        return near_tie(self.gap, self.rounding)


def first_difference(ours: list[int], reference: list[int]) -> int | None:
    """The first index where two token lists differ (the shorter one's end counts); None if equal."""
    return None if ours == reference else shared_prefix(ours, reference)


@torch.inference_mode()
def divergence(loaded: LoadedModel, prompt_ids: list[int], ours: list[int], reference: list[int],
               rounding_dtype: torch.dtype | None = None) -> Divergence | None:
    """None when the outputs are equal; else where they part and the reference's logit gap there, from one
    forward pass of prompt + the shared prefix in the model's dtype; the rounding that makes a near tie in
    ``rounding_dtype`` (default: the model's)."""
    position = first_difference(ours, reference)
    if position is None:
        return None
    ids = torch.tensor([prompt_ids + reference[:position]], device=loaded.device)
    hidden = loaded.model.base_model(input_ids=ids).last_hidden_state[0, -1:]
    top = loaded.runtime.logits(hidden)[0].topk(2).values
    dtype = rounding_dtype or loaded.model.get_input_embeddings().weight.dtype
    return Divergence(position, float(top[0] - top[1]), rounding_gap(float(top[0]), dtype))
