"""The SAR objective: packed mask groups over self-generated sequences, frozen base model.

Each sample packs up to G mask groups (one per anchor position). The ordinary tokens are
encoded once without gradient (their key/values never depend on the adapter); the mask rows
then attend to ``[prompt slots | those key/values | their own group]`` with gradient.

The loss per mask row is cross-entropy to the answer's token (the frozen model's greedy choice,
since the answers are its own greedy output), mixed with ``soft_weight`` of the KL divergence from
the frozen model's whole distribution there, which the ordinary pass has already computed (soft
targets: how sure the model was, and what it would have said instead); rows are weighted by their
depth (``depth_weights``: e.g. what a right draft at that depth is worth).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from transformers import DynamicCache

from ..decode.masks import packed_groups
from ..model.adapter import BitaAdapter
from ..runtime.device import output_logits
from ..runtime.layer_masks import layer_attention_mask

IGNORE = -100


@dataclass
class Batch:
    input_ids: torch.Tensor  # [B, T] right-padded prompt + answer
    lengths: torch.Tensor  # [B]
    anchors: torch.Tensor  # [B, G] ordinary positions carrying a mask group, -1 = unused


def make_batch(samples: list[dict], n_anchors: int, max_length: int, rng: random.Random,
               every_anchor: bool = False) -> Batch:
    """Anchors lie in the answer: from the last prompt token to the third-last token.
    ``every_anchor``: take the first ``n_anchors`` anchors in order (for evaluation)."""
    sequences, anchor_lists = [], []
    for sample in samples:
        sequence = (sample["prompt_ids"] + sample["answer_ids"])[:max_length]
        candidates = list(range(len(sample["prompt_ids"]) - 1, len(sequence) - 2))
        chosen = (candidates[:n_anchors] if every_anchor
                  else sorted(rng.sample(candidates, min(n_anchors, len(candidates)))))
        sequences.append(sequence)
        anchor_lists.append(chosen + [-1] * (n_anchors - len(chosen)))
    width = max(map(len, sequences))
    return Batch(torch.tensor([s + [0] * (width - len(s)) for s in sequences]),
                 torch.tensor([len(s) for s in sequences]), torch.tensor(anchor_lists))


class SarObjective(nn.Module):
    """The adapter plus a (non-registered) frozen base model; forward returns the SAR loss and
    per-depth top-1 counts. Wrapping makes the adapter the only module DDP synchronises."""

    def __init__(self, adapter: BitaAdapter, model: nn.Module, soft_weight: float = 0.0,
                 depth_weights: tuple[float, ...] = ()):
        super().__init__()
        self.adapter = adapter
        self._frozen = (model,)
        self.soft_weight = soft_weight
        self.depth_weights = depth_weights  # [n], or () for equal

    def mask_logits(self, input_ids, lengths, anchors):
        """Logits of every mask row and what it should predict.

        input_ids: [B, T]; lengths: [B]; anchors: [B, G] (-1 = unused group).
        Returns logits [B, G*n, V], targets [B, G*n] (IGNORE where not counted), counted [B, G*n] bool,
        and the frozen model's hidden states of the ordinary tokens [B, T, H] (no gradient).
        """
        model = self._frozen[0]
        n = self.adapter.n_masks
        batch, width = input_ids.shape
        dtype = model.get_input_embeddings().weight.dtype
        valid = torch.arange(width, device=input_ids.device)[None] < lengths[:, None]  # [B, T]
        with torch.no_grad():
            ordinary = DynamicCache()
            ordinary_hidden = model.base_model(input_ids=input_ids, attention_mask=valid.long(),
                                               past_key_values=ordinary, use_cache=True).last_hidden_state
        context = [(layer.keys, layer.values) for layer in ordinary.layers]
        packed = packed_groups(anchors, n, width)
        rows = anchors.shape[1] * n
        positions = torch.arange(width, device=input_ids.device).expand(batch, -1)  # ordinary keys [B, T]
        allowed = torch.cat([
            torch.ones(batch, rows, self.adapter.n_prompt, dtype=torch.bool, device=input_ids.device),
            packed.visible_ordinary & valid[:, None, :],
            packed.visible_masks[None].expand(batch, -1, -1),
        ], dim=2)
        hidden = model.base_model(
            inputs_embeds=self.adapter.mask_embeddings.to(dtype).repeat(anchors.shape[1], 1)[None].expand(
                batch, -1, -1),
            position_ids=packed.positions,
            attention_mask=layer_attention_mask(model.config.get_text_config(), allowed, packed.positions,
                                                torch.cat([positions, packed.positions], dim=1), dtype,
                                                input_ids.device),
            past_key_values=self.adapter.prompt_cache(model, batch, dtype, context),
            use_cache=True,
        ).last_hidden_state
        counted = (anchors >= 0).repeat_interleave(n, dim=1) & (packed.target_index < lengths[:, None])
        targets = input_ids.gather(1, packed.target_index.clamp(max=width - 1)).masked_fill(~counted, IGNORE)
        return output_logits(model, hidden), targets, counted, ordinary_hidden

    def forward(self, input_ids, lengths, anchors):
        """SAR loss (see the module docstring) and per-depth top-1 hits and counts [n]."""
        logits, targets, counted, ordinary_hidden = self.mask_logits(input_ids, lengths, anchors)
        n = self.adapter.n_masks
        depth = torch.arange(logits.shape[1], device=input_ids.device) % n
        row_loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=IGNORE,
                                   reduction="none").view_as(targets)  # [B, G*n], 0 where not counted
        if self.soft_weight:
            row_loss = (1 - self.soft_weight) * row_loss + self.soft_weight * self.soft_loss(
                logits, ordinary_hidden, input_ids, anchors)
        weights = counted * (torch.tensor(self.depth_weights, device=logits.device)[depth] if self.depth_weights
                             else 1.0)
        loss = (row_loss * weights).sum() / weights.sum().clamp(min=1e-9)
        hits = (logits.argmax(-1) == targets) & counted
        per_depth = lambda x: torch.zeros(n, device=x.device).index_add_(0, depth, x.float().sum(0))  # noqa: E731
        return loss, per_depth(hits), per_depth(counted)

    def soft_loss(self, logits, ordinary_hidden, input_ids, anchors):
        """KL(frozen model || mask rows) per mask row [B, G*n]: the frozen model's distribution over the
        token a row predicts comes from the ordinary row just before it (logits [B, G*n, V],
        ordinary_hidden [B, T, H]); rows past the sequence give garbage that the caller's weights drop."""
        width = input_ids.shape[1]
        before = (packed_groups(anchors, self.adapter.n_masks, width).target_index - 1).clamp(0, width - 1)
        teacher = output_logits(self._frozen[0], ordinary_hidden.gather(
            1, before[..., None].expand(-1, -1, ordinary_hidden.shape[-1])))
        return F.kl_div(F.log_softmax(logits.float(), -1), F.log_softmax(teacher.float(), -1), log_target=True,
                        reduction="none").sum(-1)
