"""The attention mask of one forward pass as a heatmap: which keys each new row may attend.

Key columns are ``[P prompt slots | C cached tokens | R new rows]`` (bita/decode/masks.py). Many prompt
slots collapse into one column, and all but the last ``keep_cached`` cached tokens into another;
a collapsed cell is allowed iff every column it stands for is. An allowed cell takes the colour
of its key column's kind (prompt slot, cached, or the new row's kind); a blocked cell is blank.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import count

import plotly.graph_objects as go
import torch

from bita.decode.records import StepRecord
from bita.drafts.tree import ROOT

from .labels import Decode, draft_origin, token_label
from .layout import fit_narrow
from .palette import ATTENTION_COLORS, KEY_KINDS

CELL_NAMES = ("blocked", *KEY_KINDS)  # colorbar ticks, in code order
MAX_HOVER_CELLS = 40_000  # past it (a long prompt's prefill, a crafted file) a cell's hover is its column, row and code
MAX_HEIGHT = 2400  # pixels: past it the rows are drawn thinner


@dataclass(frozen=True)
class KeyColumn:
    """One heatmap column, standing for columns ``sources`` of ``record.attention``."""

    label: str
    kind: str  # one of KEY_KINDS
    sources: range


def _known_tail(context_tokens: Sequence[int] | None, n: int) -> list[int] | None:
    """The last ``n`` context ids, or None when fewer are known."""
    tokens = list(context_tokens or [])
    return tokens[len(tokens) - n:] if n and len(tokens) >= n else None


def row_labels(record: StepRecord, decode: Decode, context_tokens: Sequence[int] | None = None) -> list[str]:
    """[R] label of each new row: context token, 'root …', candidate '… dDrK' (rank K of the mask
    drafts at depth D; 'ng' for the context n-gram, 'rK+ng' for both), 'mask i @ anchor'.
    ``context_tokens``: ids before the root, oldest first (in a prefill they label the prompt rows)."""
    kinds, nodes = record.row_kinds, record.nodes
    n_context = kinds.count("context")
    known = _known_tail(context_tokens, n_context)
    anchors = [ROOT] + [i for i, n in enumerate(nodes) if n.has_group]  # bita.tree.DraftTree.group_anchors
    n_masks = max(1, kinds.count("mask") // len(anchors))
    labels, candidates, masks = [], iter(nodes), count()
    for kind in kinds:
        if kind == "context":
            j = len(labels)
            labels.append(token_label(decode, known[j]) if known else f"t{record.position - n_context + j}")
        elif kind == "root":
            labels.append(f"root {token_label(decode, record.root)}")
        elif kind == "candidate":
            node = next(candidates)
            labels.append(f"{token_label(decode, node.token)} d{node.depth}{draft_origin(node, short=True)}")
        else:
            k = next(masks)
            anchor = anchors[min(k // n_masks, len(anchors) - 1)]
            anchor_label = "root" if anchor == ROOT else token_label(decode, nodes[anchor].token)
            labels.append(f"mask {k % n_masks} @ {anchor_label}")
    return labels


def key_columns(record: StepRecord, rows: list[str], decode: Decode, context_tokens: Sequence[int] | None = None,
                keep_prompt: int = 8, keep_cached: int = 8) -> list[KeyColumn]:
    """Heatmap columns: prompt slots (one column when more than ``keep_prompt``), cached tokens
    (all but the last ``keep_cached`` in one column), then one per new row, labelled ``rows``."""
    n_rows, width = record.attention.shape
    n_prompt = record.n_prompt
    n_cached = width - n_prompt - n_rows
    if n_prompt > keep_prompt:
        columns = [KeyColumn(f"P prompt slots ({n_prompt})", "prompt", range(n_prompt))]
    else:
        columns = [KeyColumn(f"P{j}", "prompt", range(j, j + 1)) for j in range(n_prompt)]
    hidden = n_cached - keep_cached if n_cached > keep_cached + 1 else 0
    if hidden:
        columns.append(KeyColumn(f"… {hidden} cached", "cached", range(n_prompt, n_prompt + hidden)))
    known = _known_tail(context_tokens, n_cached)
    for j in range(hidden, n_cached):
        label = token_label(decode, known[j]) if known else f"t{j}"
        columns.append(KeyColumn(label, "cached", range(n_prompt + j, n_prompt + j + 1)))
    start = n_prompt + n_cached
    columns += [KeyColumn(label, kind, range(start + r, start + r + 1))
                for r, (label, kind) in enumerate(zip(rows, record.row_kinds))]
    return columns


WHY = {  # (row kind or "mask"/"ordinary", column kind, allowed) -> why, for a cell's hover
    ("mask", "prompt", True): "prompt slot: the learned prompt steers the mask rows",
    ("ordinary", "prompt", False): "prompt slot: ordinary rows never see it, so they compute what AR computes",
    ("any", "cached", True): "cached context: every row sees it",
    ("ordinary", "chain", True): "earlier ordinary token: causal",
    ("ordinary", "chain", False): "later ordinary token: causal",
    ("draft", "chain", True): "the root and the context before it lie on every path",
    ("ordinary", "candidate", False): "a draft: the root and context never see drafts",
    ("candidate", "candidate", True): "same path: an ancestor draft",
    ("candidate", "candidate", False): "not on its path (another branch, or below it)",
    ("mask", "candidate", True): "same path: its group's anchor or an ancestor of it",
    ("mask", "candidate", False): "not on its group's path",
    ("ordinary", "mask", False): "a mask: ordinary rows never see masks, so drafting leaves verification exact",
    ("own group", "mask", True): "own group: an earlier mask",
    ("own group", "mask", False): "own group: a later mask (mask i sees masks up to i)",
    ("other group", "mask", False): "another group: groups draft for different anchors",
}


def cell_reason(row_kind: str, column_kind: str, allowed: bool, same_group: bool = False,
                same_row: bool = False) -> str:
    """Why a row may (or may not) attend a key column, in words; ``same_group``: both are mask
    rows of one group; ``same_row``: the key is the row itself."""
    if same_row:
        return "itself"
    if column_kind == "cached":
        return WHY[("any", "cached", True)]
    if column_kind in ("context", "root"):
        return WHY[("draft" if row_kind in ("candidate", "mask") and allowed else "ordinary", "chain", allowed)]
    if column_kind == "mask" and row_kind == "mask":
        return WHY[("own group" if same_group else "other group", "mask", allowed)]
    kind = row_kind if (row_kind, column_kind, allowed) in WHY else "mask" if row_kind == "mask" else "ordinary"
    return WHY[(kind, column_kind, allowed)]


def mask_groups(row_kinds: Sequence[str], n_groups: int) -> list[int | None]:
    """[R] mask group of each new row (None for ordinary rows); groups are consecutive and equal."""
    n_masks = max(1, row_kinds.count("mask") // max(1, n_groups))
    masks = count()
    return [next(masks) // n_masks if kind == "mask" else None for kind in row_kinds]


def cell_codes(attention: torch.Tensor, columns: list[KeyColumn]) -> torch.Tensor:
    """[R, len(columns)] long: 0 where blocked, else 1 + KEY_KINDS.index(column kind)."""
    attention = attention.bool().cpu()
    allowed = torch.stack([attention[:, c.sources.start:c.sources.stop].all(dim=1) for c in columns], dim=1)
    kinds = torch.tensor([1 + KEY_KINDS.index(c.kind) for c in columns])
    return allowed.long() * kinds


def thinned_ticks(labels: list[str], limit: int = 40, keep: Sequence[int] = ()) -> tuple[list[int], list[str]]:
    """Tick positions and texts: every label up to ``limit``, else every k-th (k = ceil(n / limit))
    plus the positions in ``keep``."""
    step = max(1, math.ceil(len(labels) / limit))
    positions = sorted(set(range(0, len(labels), step)) | set(keep))
    return positions, [labels[i] for i in positions]


def _discrete_colorscale(colors: Sequence[str]) -> list[tuple[float, str]]:
    n = len(colors)
    return [stop for i, color in enumerate(colors) for stop in ((i / n, color), ((i + 1) / n, color))]


def attention_figure(record: StepRecord, decode: Decode, context_tokens: Sequence[int] | None = None) -> go.Figure:
    """Heatmap of ``record.attention`` (bool [R, P + C + R]) after collapsing; rows top to bottom.
    ``context_tokens``: ids of the ordinary tokens before the root, oldest first, for labels."""
    if record.attention is None or record.row_kinds is None:
        raise ValueError(f"pass {record.index} has no attention mask: record it with record_attention=True")
    rows = row_labels(record, decode, context_tokens)
    columns = key_columns(record, rows, decode, context_tokens)
    codes = cell_codes(record.attention, columns)
    groups = mask_groups(record.row_kinds, 1 + sum(n.has_group for n in record.nodes))
    first_new = len(columns) - len(rows)
    column_groups = [None] * first_new + groups
    hover = None if len(rows) * len(columns) > MAX_HOVER_CELLS else [[
        f"{row} → {column.label}: {'allowed' if code else 'blocked'}"
              + (f" ({len(column.sources)} keys)" if len(column.sources) > 1 else "")
              + "<br>" + cell_reason(kind, column.kind, bool(code), group is not None and group == column_groups[c],
                                     c - first_new == r)
              for c, (column, code) in enumerate(zip(columns, line))]
             for r, (row, kind, group, line) in enumerate(zip(rows, record.row_kinds, groups, codes.tolist()))]
    figure = go.Figure(go.Heatmap(
        z=codes.tolist(), x=list(range(len(columns))), y=list(range(len(rows))), text=hover,
        hoverinfo="text" if hover else "x+y+z",
        zmin=-0.5, zmax=len(ATTENTION_COLORS) - 0.5, colorscale=_discrete_colorscale(ATTENTION_COLORS), xgap=1, ygap=1,
        colorbar=dict(tickvals=list(range(len(CELL_NAMES))), ticktext=list(CELL_NAMES), title="key")))
    boundaries = [i for i in range(1, len(columns)) if columns[i].kind != columns[i - 1].kind
                  and {columns[i].kind, columns[i - 1].kind} & {"prompt", "cached"}]
    for x in boundaries:
        figure.add_vline(x=x - 0.5, line=dict(color="#333", width=1))
    x_ticks = thinned_ticks([c.label for c in columns], keep=[i for i, c in enumerate(columns) if len(c.sources) > 1])
    y_ticks = thinned_ticks(rows, keep=[record.row_kinds.index("root")])
    n_prompt, n_rows = record.n_prompt, len(rows)
    n_cached = record.attention.shape[1] - n_prompt - n_rows
    figure.update_layout(
        title=f"Attention of pass {record.index} ({record.kind}): {n_rows} new rows; keys = "
              f"{n_prompt} prompt slots + {n_cached} cached + {n_rows} new",
        template="plotly_white", height=min(MAX_HEIGHT, max(420, 220 + 14 * n_rows)),
        xaxis=dict(tickvals=x_ticks[0], ticktext=x_ticks[1], tickangle=-60, title="key column"),
        yaxis=dict(tickvals=y_ticks[0], ticktext=y_ticks[1], autorange="reversed", title="new row"))
    return fit_narrow(figure)
