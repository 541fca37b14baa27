"""A pass's input rows given by token id: what a decoding pass sends (its root and candidates, then mask rows).

A forward that stages the ids with the pass's positions (padded.py, ``Forward.token_rows``) looks the embeddings
up inside its recorded pass, so the host sends ids in the copy it makes anyway and launches no embedding, no
concatenation and no copy of embeddings before it; any other forward takes ``embedded``."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from .device import to_device


@dataclass(frozen=True)
class TokenRows:
    """R = n + groups x m input rows: the token ids ``ids`` [n] (int64, on the host), then ``groups`` groups of the
    embeddings ``masks`` [m, H] (on the device, in the model's dtype), each group masks 0 .. m - 1 in turn."""

    ids: torch.Tensor  # [n] long
    masks: torch.Tensor | None = None  # [m, H]; None where groups is 0
    groups: int = 0

    @property
    def rows(self) -> int:
        return len(self.ids) + (self.groups * self.masks.shape[0] if self.groups else 0)

    def embedded(self, embeddings: nn.Module) -> torch.Tensor:
        """[R, H]: the ids through the model's input ``embeddings``, then the mask rows."""
        ordinary = embeddings(to_device(self.ids, embeddings.weight.device))
        return torch.cat([ordinary, self.masks.repeat(self.groups, 1)]) if self.groups else ordinary


def rows_of(embeds: torch.Tensor | TokenRows) -> int:
    """R of a pass's rows, embeddings [R, H] or TokenRows."""
    return embeds.rows if isinstance(embeds, TokenRows) else embeds.shape[0]
