"""A blank figure carrying one message, for views that have nothing to draw yet."""

from __future__ import annotations

import plotly.graph_objects as go


def notice_figure(message: str, height: int = 320) -> go.Figure:
    """An empty plot with ``message`` in its middle (no axes)."""
    figure = go.Figure()
    figure.add_annotation(text=message, x=0.5, y=0.5, xref="paper", yref="paper", showarrow=False,
                          font=dict(size=14, color="#555"))
    figure.update_layout(template="plotly_white", height=height, xaxis_visible=False, yaxis_visible=False)
    return figure
