"""The draft tree of one forward pass: the fed root, every candidate by depth, and the bonus token.

x is the depth (root 0); leaves take y = 0, 1, ... in depth-first, rank order and each parent
sits at the mean y of its children, so siblings never overlap. The bonus token (the model's own
next token) hangs off the last accepted node, or off the root when nothing was accepted. A marker's
area follows the verifier's probability of its token where its row checked it (the record's
verdicts), else the draft probability.
"""

from __future__ import annotations

from itertools import count
from math import sqrt

import plotly.graph_objects as go

from bita.decode.explain import emitting_rows
from bita.decode.records import ACCEPTED, StepRecord
from bita.drafts.sources import MASK
from bita.drafts.tree import ROOT

from .labels import Decode, draft_origin, token_label
from .layout import fit_narrow
from .palette import BONUS_COLOR, REJECTED_COLOR, ROOT_COLOR, depth_color, source_symbol
from .verdicts import percent

ROOT_SIZE = 16


def marker_size(prob: float) -> float:
    """A marker's diameter for a token of probability ``prob``: its area grows with it (8 to 30 px)."""
    return 8 + 22 * sqrt(prob)


def verifier_probs(record: StepRecord) -> dict[int, float]:
    """The verifier's probability of each node's token where a row checked it (the accepted drafts, the
    drafts turned down beside them), and of the bonus (key ``len(record.nodes)``); empty without verdicts."""
    path = record.accepted_nodes()
    _, turned_down = emitting_rows(record.draft_tree(), path)
    found = {}
    for slot, verdict in enumerate(record.verdicts):
        found[path[slot] if slot < len(path) else len(record.nodes)] = verdict.chosen.prob
        found.update((node, draft.prob) for node, draft in zip(turned_down[slot], verdict.rejected))
    return found


def tree_positions(record: StepRecord) -> dict[int, tuple[int, float]]:
    """(x, y) of the root (key ROOT), of each node (its index) and of the bonus (key
    ``len(record.nodes)``). The bonus is its parent's first child; other children go by rank."""
    nodes, bonus = record.nodes, len(record.nodes)
    path = record.accepted_nodes()
    bonus_parent = path[-1] if path else ROOT
    children: dict[int, list[int]] = {ROOT: [], **{i: [] for i in range(bonus + 1)}}
    children[bonus_parent].append(bonus)
    for i in sorted(range(bonus), key=lambda i: nodes[i].rank):
        children[nodes[i].parent].append(i)
    depth = {ROOT: 0, bonus: len(path) + 1, **{i: n.depth for i, n in enumerate(nodes)}}
    positions: dict[int, tuple[int, float]] = {}
    leaves = count()

    def place(key: int) -> None:
        for kid in children[key]:
            place(kid)
        ys = [positions[kid][1] for kid in children[key]]
        positions[key] = (depth[key], sum(ys) / len(ys) if ys else float(next(leaves)))

    place(ROOT)
    return positions


def _markers(name: str, keys: list[int], positions, labels: list[str], hovers: list[str], colors,
             symbols: str | list[str] = "circle", sizes: float | list[float] = ROOT_SIZE) -> go.Scatter:
    return go.Scatter(x=[positions[k][0] for k in keys], y=[positions[k][1] for k in keys], mode="markers+text",
                      name=name, text=labels, textposition="middle right", hovertext=hovers, hoverinfo="text",
                      marker=dict(size=sizes, color=colors, symbol=symbols, line=dict(width=1, color="#333")))


def draft_tree_figure(record: StepRecord, decode: Decode) -> go.Figure:
    """Markers: root, accepted nodes (coloured by depth), rejected nodes, bonus; parent->child edges.
    A node's marker shape says who proposed it: the mask drafts (circle), the context n-gram
    (diamond) or both (square); its size, the verifier's probability of it (``verifier_probs``) or
    else its draft probability."""
    nodes, bonus = record.nodes, len(record.nodes)
    positions = tree_positions(record)
    checked = verifier_probs(record)
    path = record.accepted_nodes()
    figure = go.Figure()
    xs, ys = [], []
    for child, node in enumerate(nodes):
        xs += [positions[node.parent][0], positions[child][0], None]
        ys += [positions[node.parent][1], positions[child][1], None]
    figure.add_trace(go.Scatter(x=xs, y=ys, mode="lines", line=dict(color="#bbb", width=1.5),
                                hoverinfo="skip", showlegend=False))
    tail = path[-1] if path else ROOT
    (x0, y0), (x1, y1) = positions[tail], positions[bonus]
    figure.add_trace(go.Scatter(x=[x0, x1], y=[y0, y1], mode="lines", line=dict(color=BONUS_COLOR, width=2, dash="dot"),
                                hoverinfo="skip", showlegend=False))

    every_row = len(record.verdicts) == len(path) + 1  # verdicts of every row the walk checked (none cut at a stop)

    def said(key: int) -> str:
        if key in checked:
            return f"<br>the verifier: {percent(checked[key])}"
        return "<br>not checked: below a rejected draft" if every_row and key != bonus else ""

    def hover(i: int) -> str:
        n = nodes[i]
        chance = "" if n.chance is None else f"<br>estimated chance {n.chance:.2f}: what the dynamic tree chose it by"
        return (f"{token_label(decode, n.token, 40)}<br>depth {n.depth}<br>{draft_origin(n, 3)}{chance}"
                f"<br>{n.status}{said(i)}{'<br>carries a mask group' if n.has_group else ''}")

    def size(key: int) -> float:
        if key in checked:
            return marker_size(checked[key])
        return ROOT_SIZE if key == bonus else marker_size(nodes[key].prob)

    root_label = token_label(decode, record.root)
    figure.add_trace(_markers("root (fed)", [ROOT], positions, [root_label],
                              [f"{root_label}<br>root: fed this pass, position {record.position}"], ROOT_COLOR))
    for name, keys, colors in (
            ("accepted", path, [depth_color(nodes[i].depth) for i in path]),
            ("rejected", [i for i, n in enumerate(nodes) if n.status != ACCEPTED], REJECTED_COLOR)):
        if keys:
            figure.add_trace(_markers(name, keys, positions, [token_label(decode, nodes[i].token) for i in keys],
                                      [hover(i) for i in keys], colors,
                                      [source_symbol(nodes[i].source) for i in keys], [size(i) for i in keys]))
    bonus_label = token_label(decode, record.bonus)
    figure.add_trace(_markers("bonus (model's own)", [bonus], positions, [bonus_label],
                              [f"{bonus_label}<br>bonus: the model's next token after the accepted drafts{said(bonus)}"],
                              BONUS_COLOR, sizes=[size(bonus)]))
    summary = (f"{len(path)} of {len(nodes)} drafts accepted" if nodes
               else "no draft tree: root and bonus only")
    if any(n.source != MASK for n in nodes):
        summary += " (◆ context n-gram, ★ past answers, ■ several agreed)"
    if any(n.chance is not None for n in nodes):
        summary += "; a dynamic tree: hover for each draft's estimated chance"
    if checked:
        summary += "; size: the verifier's probability"
    leaves = 1 + max(y for _, y in positions.values())
    figure.update_layout(
        title=f"Pass {record.index} ({record.kind}): {summary}", template="plotly_white",
        height=max(300, 120 + 36 * leaves), hovermode="closest",
        xaxis=dict(title="depth", dtick=1, range=[-0.5, max(x for x, _ in positions.values()) + 1]),
        yaxis=dict(visible=False, autorange="reversed"))
    return fit_narrow(figure)
