"""Why one token: the top alternatives of the verifier's row that chose it, as horizontal bars.

The bars are the row's TOP_K likeliest tokens (bita/decode/explain.py), then the chosen token and any draft
that row turned down where they are not among them: the chosen token in its role's colour, the drafts turned down grey, the rest pale.
A sampled pass shows the distribution the token was drawn from (temperature, top-p, top-k applied) and,
beside it, the raw softmax.
"""

from __future__ import annotations

import plotly.graph_objects as go

from bita.decode.records import StepRecord

from .labels import Decode, token_label
from .layout import fit_narrow
from .notice import notice_figure
from .palette import REJECTED_COLOR, role_color
from .verdicts import percent

OTHER_COLOR = "#d5d5d5"


def alternatives_figure(record: StepRecord, slot: int, decode: Decode) -> go.Figure:
    """The bars of the row that chose token ``slot`` of ``record.emitted`` (-1: its last, clamped to the
    pass's tokens); a notice where the record carries no verdicts."""
    if not record.verdicts:
        return notice_figure(f"Pass {record.index} recorded no verdicts.", height=260)
    slot = min(slot, len(record.verdicts) - 1) if slot >= 0 else len(record.verdicts) - 1
    verdict, role = record.verdicts[slot], record.emitted_roles()[slot]
    bars = list(verdict.top)
    for extra in (verdict.chosen, *verdict.rejected):
        if all(a.token != extra.token for a in bars):
            bars.append(extra)
    rejected = {a.token for a in verdict.rejected}
    notes = [f"chosen ({role})" if a.token == verdict.chosen.token else "draft, turned down" if a.token in rejected
             else "" for a in bars]
    colors = [role_color(role) if note.startswith("chosen") else REJECTED_COLOR if note else OTHER_COLOR
              for note in notes]
    labels = [token_label(decode, a.token, 20) for a in bars]
    rows = list(range(len(bars)))
    hovers = [f"{label}: {percent(a.prob)}<br>raw softmax {percent(a.raw_prob)}, logit {a.logit:.3f}<br>{note}"
              for label, a, note in zip(labels, bars, notes)]
    drawn = "drawn from" if record.sampled else "the model's probability"
    figure = go.Figure(go.Bar(x=[a.prob for a in bars], y=rows, orientation="h", marker_color=colors, name=drawn,
                              text=[percent(a.prob) for a in bars], textposition="auto", hovertext=hovers,
                              hoverinfo="text"))
    if record.sampled:
        figure.add_trace(go.Bar(x=[a.raw_prob for a in bars], y=rows, orientation="h", name="raw softmax",
                                marker=dict(color="rgba(0,0,0,0)", line=dict(color="#555", width=1)),
                                hoverinfo="skip"))
    tie = ", a near tie" if verdict.near_tie else ""
    figure.update_layout(
        title=f"Pass {record.index}, token {slot + 1}: {token_label(decode, verdict.chosen.token, 20)} "
              f"{percent(verdict.chosen.prob)}{tie}",
        template="plotly_white", height=150 + 28 * len(bars), barmode="overlay", bargap=0.25,
        xaxis=dict(title=f"probability (entropy {verdict.entropy:.2f} nats)", range=[0, 1], tickformat=".0%"),
        yaxis=dict(tickvals=rows, ticktext=labels, autorange="reversed"), showlegend=record.sampled)
    return fit_narrow(figure)
