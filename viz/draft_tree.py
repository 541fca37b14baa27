"""The draft tree of one forward pass: the fed root, every candidate by depth, and the bonus token.

x is the depth (root 0); leaves take y = 0, 1, ... in depth-first, rank order and each parent
sits at the mean y of its children, so siblings never overlap. The bonus token (the model's own
next token) hangs off the last accepted node, or off the root when nothing was accepted.
"""

from __future__ import annotations

from itertools import count

import plotly.graph_objects as go

from bita.decode.records import ACCEPTED, StepRecord
from bita.drafts.sources import MASK
from bita.drafts.tree import ROOT

from .labels import Decode, draft_origin, token_label
from .layout import fit_narrow
from .palette import BONUS_COLOR, REJECTED_COLOR, ROOT_COLOR, depth_color, source_symbol


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
             symbols: str | list[str] = "circle") -> go.Scatter:
    return go.Scatter(x=[positions[k][0] for k in keys], y=[positions[k][1] for k in keys], mode="markers+text",
                      name=name, text=labels, textposition="middle right", hovertext=hovers, hoverinfo="text",
                      marker=dict(size=16, color=colors, symbol=symbols, line=dict(width=1, color="#333")))


def draft_tree_figure(record: StepRecord, decode: Decode) -> go.Figure:
    """Markers: root, accepted nodes (coloured by depth), rejected nodes, bonus; parent->child edges.
    A node's marker shape says who proposed it: the mask drafts (circle), the context n-gram
    (diamond) or both (square)."""
    nodes, bonus = record.nodes, len(record.nodes)
    positions = tree_positions(record)
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

    def hover(i: int) -> str:
        n = nodes[i]
        chance = "" if n.chance is None else f"<br>estimated chance {n.chance:.2f}: what the dynamic tree chose it by"
        return (f"{token_label(decode, n.token, 40)}<br>depth {n.depth}<br>{draft_origin(n, 3)}{chance}"
                f"<br>{n.status}{'<br>carries a mask group' if n.has_group else ''}")

    root_label = token_label(decode, record.root)
    figure.add_trace(_markers("root (fed)", [ROOT], positions, [root_label],
                              [f"{root_label}<br>root: fed this pass, position {record.position}"], ROOT_COLOR))
    for name, keys, colors in (
            ("accepted", path, [depth_color(nodes[i].depth) for i in path]),
            ("rejected", [i for i, n in enumerate(nodes) if n.status != ACCEPTED], REJECTED_COLOR)):
        if keys:
            figure.add_trace(_markers(name, keys, positions, [token_label(decode, nodes[i].token) for i in keys],
                                      [hover(i) for i in keys], colors,
                                      [source_symbol(nodes[i].source) for i in keys]))
    bonus_label = token_label(decode, record.bonus)
    figure.add_trace(_markers("bonus (model's own)", [bonus], positions, [bonus_label],
                              [f"{bonus_label}<br>bonus: the model's next token after the accepted drafts"],
                              BONUS_COLOR))
    summary = (f"{len(path)} of {len(nodes)} drafts accepted" if nodes
               else "no draft tree: root and bonus only")
    if any(n.source != MASK for n in nodes):
        summary += " (◆ context n-gram, ★ past answers, ■ several agreed)"
    if any(n.chance is not None for n in nodes):
        summary += "; a dynamic tree: hover for each draft's estimated chance"
    leaves = 1 + max(y for _, y in positions.values())
    figure.update_layout(
        title=f"Pass {record.index} ({record.kind}): {summary}", template="plotly_white",
        height=max(300, 120 + 36 * leaves), hovermode="closest",
        xaxis=dict(title="depth", dtick=1, range=[-0.5, max(x for x, _ in positions.values()) + 1]),
        yaxis=dict(visible=False, autorange="reversed"))
    return fit_narrow(figure)
