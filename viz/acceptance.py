"""Why an answer went as fast as it did: how deep the drafts landed, and what ``auto`` expected.

Two figures of one answer's step records: the share of drafting passes whose accepted path
reached each depth (with how many drafts at that depth were fed), and the tokens/s ``auto``
forecast for the shapes it weighed against the tokens/s measured. The compression ratio
(tau, tokens per pass) is shown apart from speed: tau is what the drafts earned, tokens/s
what that was worth on this machine.
"""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from bita.decode.records import StepRecord

from .layout import fit_narrow
from .palette import BONUS_COLOR, REJECTED_COLOR, depth_color


def depth_shares(records: Sequence[StepRecord]) -> list[tuple[int, float, float]]:
    """Per depth d (1..deepest draft): (d, share of drafting passes whose accepted path reached d,
    mean drafts fed at depth d per drafting pass)."""
    drafting = [r for r in records if r.kind == "tree" and r.nodes]
    deepest = max((n.depth for r in drafting for n in r.nodes), default=0)
    total = max(1, len(drafting))
    return [(d, sum(len(r.accepted) >= d for r in drafting) / total,
             sum(n.depth == d for r in drafting for n in r.nodes) / total) for d in range(1, deepest + 1)]


def depth_figure(records: Sequence[StepRecord]) -> go.Figure:
    """Bars per depth: the share of drafting passes whose accepted path reached it; hover: drafts fed there."""
    shares = depth_shares(records)
    figure = go.Figure(go.Bar(x=[d for d, _, _ in shares], y=[s for _, s, _ in shares],
                              marker_color=[depth_color(d) for d, _, _ in shares],
                              text=[f"{s:.0%}" for _, s, _ in shares], textposition="outside",
                              hovertext=[f"depth {d}: reached in {s:.0%} of drafting passes; {fed:.1f} drafts "
                                         f"fed there a pass" for d, s, fed in shares], hoverinfo="text"))
    drafting = sum(r.kind == "tree" and bool(r.nodes) for r in records)
    figure.update_layout(template="plotly_white", xaxis=dict(title="draft depth", dtick=1),
                         yaxis=dict(title="passes that accepted it", tickformat=".0%", range=[0, 1.1]),
                         title=f"Acceptance per depth: over {drafting} passes that drafted")
    return fit_narrow(figure)


def forecast_figure(ranking: Sequence[tuple[str, float, float]], ar_rate: float | None, chosen: str,
                    measured_rate: float, measured_tau: float) -> go.Figure:
    """Horizontal bars: the expected tokens/s of each shape ``auto`` weighed (``ranking``: (spec,
    tau, tok/s), best first) and of plain AR; a line at the tokens/s this answer measured."""
    rows = [(spec, tau, rate) for spec, tau, rate in ranking] + ([("plain AR", 1.0, ar_rate)] if ar_rate else [])
    rows.reverse()  # best on top
    figure = go.Figure(go.Bar(
        y=[spec for spec, _, _ in rows], x=[rate for _, _, rate in rows], orientation="h",
        marker_color=[BONUS_COLOR if spec == chosen else REJECTED_COLOR for spec, _, _ in rows],
        hovertext=[f"{spec}: forecast tau {tau:.2f}, {rate:.1f} tok/s" for spec, tau, rate in rows],
        hoverinfo="text", name="forecast"))
    figure.add_vline(x=measured_rate, line=dict(color="#333", width=2, dash="dash"),
                     annotation_text=f"measured {measured_rate:.1f} tok/s", annotation_position="top")
    figure.update_layout(template="plotly_white", xaxis_title="tokens / s", showlegend=False,
                         height=max(300, 90 + 26 * len(rows)),
                         title=f"What auto expected: this answer drafted with {chosen}, tau {measured_tau:.2f} "
                               f"tokens per pass (compression, not speed)")
    return fit_narrow(figure)

