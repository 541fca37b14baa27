"""How a mask group's logits become the next pass's drafts, on the logits' device. Pure: no model.

Greedy, a depth's drafts are its mask row's most probable tokens. Sampled, they are *raced*: the mask row's
distribution q, warped as the request warps the model's, raced with the vector E the verifier will race the model's
p with at that position (``raced``): the first draft is argmax(q / E), the token sampling would emit there if p were
q, so where q is near p it is the emitted token far more often than q's most probable one is. The output is AR's
either way (the walk accepts only what the race with p picks, bita/decode/verify.py); only how often a draft is
accepted changes. The vectors are the request's by position (``RaceNoise``): raced drafts draw them a few positions
before the walk needs them, the same vectors in the same order.
"""

from __future__ import annotations

import torch

from .sampling import GREEDY, Sampling, largest
from .verify import AheadNoise

RACE_CANDIDATES = 64  # a raced draft is one of its mask row's this many most probable tokens


def draft_choice(logits: torch.Tensor, k: int, sampling: Sampling = GREEDY,
                 vectors: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Mask-group logits [depth, V] -> (probs, tokens) [depth, k] on the logits' device, probs the softmax of logits.
    Greedy, or without ``vectors``: the k most probable (``largest``: torch.topk's, from the blocks of the vocabulary
    with the largest maxima). Sampled with vectors [depth, V], the race vectors of the positions the depths draft:
    ``raced``'s."""
    probs = torch.softmax(logits, dim=-1)
    if sampling.greedy or vectors is None:
        return largest(probs, k)
    tokens = raced(logits, vectors, k, sampling)
    return probs.gather(-1, tokens), tokens


def raced(logits: torch.Tensor, vectors: torch.Tensor, k: int, sampling: Sampling) -> torch.Tensor:
    """tokens [depth, k]: per depth the k largest q / E, q the mask row's distribution (logits [depth, V]) at the
    request's temperature, cut to its top-k and top-p among its RACE_CANDIDATES most probable tokens (a draft needs
    no exact nucleus), and E [V] that depth's row of ``vectors``: first the token the race would pick were q the
    model's distribution there."""
    warped, tokens = largest(torch.softmax(logits.float() / sampling.temperature, -1),
                             min(RACE_CANDIDATES, logits.shape[-1]))  # [depth, C], most probable first
    kept = warped.cumsum(-1) - warped < sampling.top_p  # what comes before a token holds less than top_p
    if sampling.top_k:
        kept[..., sampling.top_k:] = False
    scores = torch.where(kept, warped / vectors.gather(-1, tokens), 0.0)
    return tokens.gather(-1, torch.topk(scores, min(k, scores.shape[-1])).indices)


def raced_vectors(ahead: AheadNoise | None, accepted: int, depth: int, size: int) -> torch.Tensor | None:
    """[depth, size] the race vectors of the positions a mask group drafts after a pass that accepted ``accepted``
    drafts (its bonus ``accepted`` past the root row's position, then one a depth); None without ``ahead``."""
    return None if ahead is None else torch.stack([ahead(accepted + d, size) for d in range(1, depth + 1)])
