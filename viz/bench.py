"""Figures of a bench report (the dict ``BenchReport.to_json`` returns) and of pass costs."""

from __future__ import annotations

from pathlib import Path

import plotly.graph_objects as go
import plotly.io as pio


def speedup_by_category(report: dict) -> go.Figure:
    """Bars: BiTA tok/s over baseline tok/s per category, plus all prompts; 1x drawn as a line."""
    rows = [*report["categories"].items(), ("all", report["summary"])]
    figure = go.Figure(go.Bar(
        x=[name for name, _ in rows], y=[s["speedup"] for _, s in rows],
        text=[f"{s['speedup']:.2f}x<br>tau {s['mean_accepted']:.2f}" for _, s in rows], textposition="outside",
        marker_color=["#4c78a8"] * (len(rows) - 1) + ["#f58518"]))
    figure.add_hline(y=1.0, line_dash="dot", annotation_text=report["summary"]["baseline"])
    summary = report["summary"]
    figure.update_layout(title=f"Speedup per category ({summary['device']}, tree {summary['tree']})",
                         yaxis_title=f"BiTA tok/s / {report['summary']['baseline']} tok/s", template="plotly_white")
    return figure


def tau_histogram(report: dict) -> go.Figure:
    """Histogram over prompts of tau (new tokens per BiTA forward pass)."""
    figure = go.Figure(go.Histogram(x=[p["mean_accepted"] for p in report["prompts"]], nbinsx=30,
                                    marker_color="#54a24b"))
    figure.update_layout(title=f"Tokens per forward pass over {len(report['prompts'])} prompts "
                               f"(mean {report['summary']['mean_accepted']:.2f})",
                         xaxis_title="tau (new tokens / forward passes)", yaxis_title="prompts",
                         template="plotly_white")
    return figure


def pass_cost_figure(passes: list[dict], ar_seconds: float | None = None) -> go.Figure:
    """Milliseconds of one pass against rows per pass, one labelled point per tree shape.
    ``passes``: dicts with ``tree``, ``rows``, ``seconds``."""
    figure = go.Figure(go.Scatter(
        x=[p["rows"] for p in passes], y=[1000 * p["seconds"] for p in passes], mode="markers+text",
        text=[p["tree"] for p in passes], textposition="top center", marker=dict(size=9, color="#e45756")))
    if ar_seconds is not None:
        figure.add_hline(y=1000 * ar_seconds, line_dash="dot", annotation_text="AR pass")
    figure.update_layout(title="Cost of one forward pass per tree shape", xaxis_title="rows per pass",
                         yaxis_title="ms per pass", template="plotly_white")
    return figure


def write_html(figures: list[go.Figure], path: str | Path, title: str = "BiTA bench") -> Path:
    """One self-contained HTML page (plotly.js inlined once) holding ``figures`` in order."""
    parts = [pio.to_html(figure, full_html=False, include_plotlyjs=index == 0)
             for index, figure in enumerate(figures)]
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title></head>"
                    f"<body>{''.join(parts)}</body></html>", encoding="utf-8")
    return path
