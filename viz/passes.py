"""Tokens emitted per forward pass over a generation, stacked by role, with the running mean tau."""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from bita.decode.records import BONUS, StepRecord, accepted_role

from .layout import fit_narrow
from .palette import role_color


def role_counts(records: Sequence[StepRecord]) -> dict[str, list[int]]:
    """Role -> [len(records)] number of tokens of that role each pass emitted; roles in output
    order (accepted depth 1, 2, ..., then bonus)."""
    roles = [r.emitted_roles() for r in records]
    depth = max((len(r.accepted) for r in records), default=0)
    order = [accepted_role(d) for d in range(1, depth + 1)] + [BONUS]
    return {role: [pass_roles.count(role) for pass_roles in roles] for role in order}


def tokens_per_pass_figure(records: Sequence[StepRecord]) -> go.Figure:
    """Stacked bars per pass (x = ``StepRecord.index``): accepted drafts by depth, then the bonus;
    a line of tau so far (tokens emitted / passes)."""
    x = [r.index for r in records]
    figure = go.Figure([go.Bar(x=x, y=counts, name=role, marker_color=role_color(role))
                        for role, counts in role_counts(records).items()])
    emitted = 0
    running = []
    for passes, record in enumerate(records, start=1):
        emitted += len(record.emitted)
        running.append(emitted / passes)
    figure.add_trace(go.Scatter(x=x, y=running, mode="lines", name="mean tokens / pass (tau)",
                                line=dict(color="#333", width=2)))
    figure.update_layout(barmode="stack", template="plotly_white", xaxis_title="forward pass",
                         yaxis_title="tokens emitted", yaxis_dtick=1, bargap=0.1,
                         title=f"Tokens per forward pass: {emitted} in {len(records)} passes "
                               f"(tau {emitted / max(1, len(records)):.2f})")
    return fit_narrow(figure)
