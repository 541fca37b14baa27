"""The target model's distribution at each draft depth of a held-out pass, as an adapter stores it:
written by calibration, read by the sampled forecast (bita/plan/sampled_forecast.py).

Under sampling a draft is accepted with the target's (warped) probability of its token, so a
forecast needs, per pass and depth, more than the true token's rank: a summary of the target's
distribution there, teacher forced on the held-out answer, from which any temperature, top-k and
top-p can be applied later. Per depth d (1..TARGET_DEPTHS, the mask depths and the n-gram chain's):

- ``top``: the target's TARGET_TOP largest logits minus the largest, descending (top[0] == 0);
- ``log_mass``: log sum_v exp(beta * (logit_v - largest)) over the whole vocabulary, for each beta
  (1 / temperature) in BETAS, so the normaliser at any temperature is interpolated, not guessed;
- ``drafts``: for the mask drafts of ranks 0..SAMPLE_RANKS-1 (depths <= n only), the index of
  their token among the target's top (OUTSIDE where not among them);
- ``answer``: the index of the answer's token among the target's top (OUTSIDE where not; UNKNOWN
  past the answer's end: the depth is then not stored).

One line per pass, aligned with the first passes of ``pass_sample`` (rank_stats.py): depths
separated by ';', fields by '/', numbers by ','; logits in hundredths of a nat.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

TARGET_DEPTHS = 4  # the default n-gram chain's length; mask depths beyond it are not stored
TARGET_TOP = 6
BETAS = (0.25, 0.5, 1.0, 1.5, 2.0, 3.0)  # 1 / temperature, ascending
TARGET_PASSES = 500
OUTSIDE = -1
SCALE = 100  # stored numbers are hundredths


@dataclass(frozen=True)
class TargetDepth:
    """The target's distribution at one depth of one pass (see the module docstring)."""

    top: tuple[float, ...]
    log_mass: tuple[float, ...]
    drafts: tuple[int, ...]
    answer: int


def target_summaries(logits: torch.Tensor, drafts: torch.Tensor, answers: torch.Tensor) -> dict[str, torch.Tensor]:
    """Summaries of N passes' target rows: logits [N, D, V] (row d predicts depth d+1's token), drafts
    [N, D, R] long (mask draft token ids; -1 where the depth has none), answers [N, D] long (-1 past
    the answer). Returns top [N, D, TARGET_TOP], log_mass [N, D, len(BETAS)], draft_index [N, D, R]
    and answer_index [N, D] (OUTSIDE where not among the top)."""
    logits = logits.float()
    values, tokens = logits.topk(TARGET_TOP, -1)  # [N, D, K]
    offsets = logits - values[..., :1]
    log_mass = torch.stack([torch.logsumexp(beta * offsets, -1) for beta in BETAS], -1)

    def index_in_top(ids: torch.Tensor) -> torch.Tensor:  # [N, D, M] -> [N, D, M]
        match = ids[..., None] == tokens[..., None, :]  # [N, D, M, K]
        return torch.where(match.any(-1), match.int().argmax(-1), torch.full_like(ids, OUTSIDE))

    return {"top": values - values[..., :1], "log_mass": log_mass, "draft_index": index_in_top(drafts),
            "answer_index": index_in_top(answers[..., None])[..., 0]}


def encode_target(top: list[list[float]], log_mass: list[list[float]], draft_index: list[list[int]],
                  answer_index: list[int], answered: list[bool], drafted: int) -> str:
    """One pass's line: depths while ``answered`` (the answer's token exists there); drafts at the
    first ``drafted`` depths (the mask depths)."""
    depths = []
    for d, (row, mass, drafts, answer) in enumerate(zip(top, log_mass, draft_index, answer_index)):
        if not answered[d]:
            break
        numbers = lambda xs: ",".join(str(round(x * SCALE)) for x in xs)  # noqa: E731
        depths.append(f"{numbers(row[1:])}/{numbers(mass)}/{','.join(map(str, drafts)) if d < drafted else ''}"
                      f"/{answer}")
    return ";".join(depths)


def decode_target(line: str) -> list[TargetDepth]:
    """``encode_target``'s line -> per stored depth, its TargetDepth."""
    depths = []
    for part in line.split(";") if line else []:
        top, mass, drafts, answer = part.split("/")
        depths.append(TargetDepth((0.0,) + tuple(int(v) / SCALE for v in top.split(",")),
                                  tuple(int(v) / SCALE for v in mass.split(",")),
                                  tuple(int(v) for v in drafts.split(",")) if drafts else (), int(answer)))
    return depths
