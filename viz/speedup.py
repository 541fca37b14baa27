"""Where the speed comes from: the expected speedup over tau (tokens a step emits) and the step's cost on this
machine, with the pass shapes timed here and one answer's point on it. Pure: a cost table and a point in,
a figure out.
"""

from __future__ import annotations

import plotly.graph_objects as go

from bita.plan.autotree import CostTable
from bita.plan.speedup import AnswerPoint, speedup_grid

from .layout import fit_narrow
from .palette import BONUS_COLOR

GRID = 60  # points along each axis
MOST_STEP = 2.5  # the step cost axis reaches this many AR passes (further, if the answer's steps cost more)


def axis(low: float, high: float) -> list[float]:
    return [low + (high - low) * i / (GRID - 1) for i in range(GRID)]


def speedup_figure(costs: CostTable, point: AnswerPoint | None, device: str) -> go.Figure:
    """Contours of tau x AR pass / step over tau (x) and the step's milliseconds (y, up to MOST_STEP AR passes or
    past the answer's steps), the break-even line (1x), a dotted line at each pass shape timed here (its rows)
    within the axis, and ``point``: the answer's tau and mean step, hover giving its expected speedup and the
    race's measured one where a race ran."""
    ar_ms = 1000 * costs.ar
    top_tau = max(4.0, point.tau + 0.5 if point else 0.0)
    top_ms = max(MOST_STEP * ar_ms, 1.3 * 1000 * point.step_seconds if point else 0.0)
    passes = [(rows, 1000 * seconds) for rows, seconds in costs.points if 1000 * seconds <= top_ms]
    taus, steps = axis(1.0, top_tau), axis(0.8 * ar_ms, top_ms)
    figure = go.Figure(go.Contour(
        x=taus, y=steps, z=speedup_grid(taus, steps, ar_ms), colorscale="RdYlGn", zmid=1.0, name="expected speedup",
        contours=dict(start=0.5, end=4.0, size=0.25, showlabels=True), colorbar=dict(title="speedup"),
        hovertemplate="tau %{x:.2f}, step %{y:.1f} ms: %{z:.2f}x<extra></extra>"))
    figure.add_trace(go.Scatter(x=taus, y=[tau * ar_ms for tau in taus], mode="lines", name="break-even (1x)",
                                line=dict(color="#333", width=2), hoverinfo="skip"))
    xs, ys = [], []
    for _, ms in passes:
        xs += [taus[0], taus[-1], None]
        ys += [ms, ms, None]
    figure.add_trace(go.Scatter(x=xs, y=ys, mode="lines", name="passes timed here", hoverinfo="skip",
                                line=dict(color="#555", width=1, dash="dot")))
    figure.add_trace(go.Scatter(x=[taus[-1]] * len(passes), y=[ms for _, ms in passes], mode="text",
                                text=[f"{rows} row{'s' if rows > 1 else ''}" for rows, _ in passes],
                                textposition="middle left", showlegend=False, hoverinfo="skip"))
    if point is not None:
        raced = f"; the race measured {point.raced:.2f}x" if point.raced is not None else ""
        figure.add_trace(go.Scatter(
            x=[point.tau], y=[1000 * point.step_seconds], mode="markers", name="this answer",
            marker=dict(symbol="star", size=18, color=BONUS_COLOR, line=dict(color="#333", width=1)),
            hovertext=[f"this answer: tau {point.tau:.2f}, {1000 * point.step_seconds:.1f} ms a step: "
                       f"{point.expected:.2f}x expected against the AR pass{raced}"], hoverinfo="text"))
    figure.update_layout(title=f"Where the speed comes from: tau x AR pass ({ar_ms:.1f} ms on {device}) / step",
                         template="plotly_white", height=420, xaxis_title="tau: tokens a step emits",
                         yaxis=dict(title="step cost (ms)", range=[steps[0], steps[-1]]))
    return fit_narrow(figure)
