"""One layout for the app's figures that reads at a phone's width (390 px) as on a desktop."""

from __future__ import annotations

import plotly.graph_objects as go


def fit_narrow(figure: go.Figure) -> go.Figure:
    """Legend in a row under the plot, clear of the x-axis title; a heatmap's colour bar thin;
    small margins; a title that wraps rather than runs off (its part after the first ': ' on a
    second, smaller line). Returns ``figure``."""
    title = figure.layout.title.text or ""
    head, sep, tail = title.partition(": ")
    figure.update_layout(
        title=dict(text=f"{head}{sep.strip()}<br><sup>{tail}</sup>" if tail else title, font=dict(size=15)),
        legend=dict(orientation="h", yanchor="top", y=-0.35, x=0), margin=dict(l=40, r=10, t=70, b=40))
    figure.update_traces(colorbar=dict(thickness=10, tickfont=dict(size=10)), selector=dict(type="heatmap"))
    return figure
