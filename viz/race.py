"""The AR-vs-BiTA race as a picture: tokens emitted against the lanes' own decoding time.

Each lane is a step line: one step per forward pass, as high as the tokens the pass emitted
and as wide as the pass took (``StepRecord.seconds``, the pass alone, without page updates).
The steeper line decodes faster; BiTA's steps are taller where drafts were accepted.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import accumulate

import plotly.graph_objects as go

from bita.decode.records import StepRecord

from .layout import fit_narrow
from .palette import BONUS_COLOR, depth_color

LANE_COLORS = {"AR": BONUS_COLOR, "BiTA": depth_color(1)}


def lane_curve(records: Sequence[StepRecord]) -> tuple[list[float], list[int]]:
    """(seconds, tokens) after each pass, starting at (0, 0): [1 + len(records)] each."""
    seconds = [0.0, *accumulate(r.seconds for r in records)]
    tokens = [0, *accumulate(len(r.emitted) for r in records)]
    return seconds, tokens


def race_figure(lanes: Sequence[tuple[str, Sequence[StepRecord]]]) -> go.Figure:
    """Tokens emitted against decoding seconds, one step line per (name, records) lane."""
    figure = go.Figure()
    for name, records in lanes:
        seconds, tokens = lane_curve(records)
        rate = tokens[-1] / seconds[-1] if seconds[-1] > 0 else 0.0
        figure.add_trace(go.Scatter(
            x=seconds, y=tokens, mode="lines+markers", line_shape="hv", name=f"{name}: {rate:.1f} tok/s",
            line=dict(color=LANE_COLORS.get(name), width=3), marker=dict(size=4),
            hovertemplate=f"{name}<br>%{{y}} tokens after %{{x:.2f}} s<extra></extra>"))
    figure.update_layout(template="plotly_white", title="Tokens emitted against decoding time",
                         xaxis_title="seconds of decoding (passes only)", yaxis_title="tokens emitted", height=380)
    return fit_narrow(figure)
