"""How a sampled token was drawn: the warp as bars (raw softmax, tempered, and what the race draws from after
top-k and top-p, with the cut drawn as a line), and the race told in words with each draft's numbers.

Pure: a ``SampledChoice`` (bita/decode/sampled_choice.py) and a token decoder in, a figure or Markdown out.
"""

from __future__ import annotations

import plotly.graph_objects as go

from bita.decode.records import StepRecord
from bita.decode.sampled_choice import SampledChoice, WarpedToken, sampled_choice

from .labels import Decode, token_label
from .layout import fit_narrow
from .notice import notice_figure
from .palette import BONUS_COLOR, REJECTED_COLOR
from .verdicts import percent

RAW_COLOR, TEMPERED_COLOR = "#d5d5d5", "#8ecae6"


def settings_text(choice: SampledChoice) -> str:
    """'temperature 0.7, top-k 40, top-p 0.9 kept 12 tokens, 93 % of the tempered mass'."""
    warp = choice.warp
    return (f"temperature {warp.temperature:g}, top-k {warp.top_k or 'off'}, top-p {warp.top_p:g} kept "
            f"{warp.kept} token{'s' if warp.kept != 1 else ''}, {percent(warp.kept_mass)} of the tempered mass")


def warp_figure(choice: SampledChoice, title: str, decode: Decode) -> go.Figure:
    """Grouped bars per token (the row's top tokens by raw logit, then the drawn token and the drafts where not
    among them): raw softmax, tempered softmax, and p, what the race draws from (0 where top-k or top-p cut it,
    the drawn token in the bonus colour, drafts grey); a dashed line where the cut falls among the top tokens."""
    tokens = choice.tokens
    labels = [token_label(decode, t.token, 14) for t in tokens]
    drafts = {judged.draft.token for judged in choice.drafts}
    figure = go.Figure()
    for name, values, color in (("raw softmax", [t.raw_prob for t in tokens], RAW_COLOR),
                                (f"tempered (÷ {choice.warp.temperature:g})", [t.tempered for t in tokens],
                                 TEMPERED_COLOR)):
        figure.add_trace(go.Bar(x=labels, y=values, name=name, marker_color=color,
                                hovertext=[f"{label}: {name} {percent(v)}" for label, v in zip(labels, values)],
                                hoverinfo="text"))
    colors = [BONUS_COLOR if t.token == choice.drawn.token else REJECTED_COLOR if t.token in drafts else "#4c78a8"
              for t in tokens]
    figure.add_trace(go.Bar(x=labels, y=[t.prob for t in tokens], name="p: drawn from (after the cut)",
                            marker_color=colors, text=[percent(t.prob) if t.kept else "cut" for t in tokens],
                            textposition="outside", hovertext=[race_line(t, decode) for t in tokens],
                            hoverinfo="text"))
    cut = next((i for i, t in enumerate(tokens) if not t.kept), None)
    if cut:  # between the last kept and the first cut of the top tokens
        figure.add_vline(x=cut - 0.5, line=dict(color="#d62728", width=2, dash="dash"),
                         annotation_text="top-k / top-p cut", annotation_position="top")
    figure.update_layout(title=f"{title}: {settings_text(choice)}", template="plotly_white", barmode="group",
                         height=380, yaxis=dict(title="probability", tickformat=".0%", range=[0, 1.1]))
    return fit_narrow(figure)


def race_line(token: WarpedToken, decode: Decode) -> str:
    """"' x': p 31 %, E 0.52, p / E 0.60", or that top-k / top-p cut it (p 0: it cannot win)."""
    if not token.kept:
        return f"{decode([token.token])!r}: cut by top-k / top-p (p 0, it cannot win)"
    return f"{decode([token.token])!r}: p {percent(token.prob)}, E {token.noise:.3f}, p / E {token.score:.3f}"


def race_story(choice: SampledChoice, decode: Decode) -> str:
    """The race in Markdown: the drawn token's numbers, then each draft checked at this position, accepted
    because it is the drawn token or rejected with its p / E against the winner's."""
    drawn = choice.drawn
    lines = [f"**How {decode([drawn.token])!r} was drawn**: each token x has a draw E(x) ~ Exp(1) fixed by the "
             "seed and this position, and the largest p(x) / E(x) wins (what AR's `torch.multinomial` computes). "
             "A draft here is accepted exactly when it is the winner.", "",
             f"- drawn: {race_line(drawn, decode)}, the largest of the vocabulary"]
    for judged in choice.drafts:
        draft = judged.draft
        if judged.accepted:
            lines.append(f"- draft {race_line(draft, decode)}: **accepted**, it is the winner")
        elif not draft.kept:
            lines.append(f"- draft {race_line(draft, decode)}: **rejected**")
        else:
            lines.append(f"- draft {race_line(draft, decode)} < {drawn.score:.3f}: **rejected**")
    if not choice.drafts:
        lines.append("- no draft was checked at this position: the drawn token is the pass's bonus")
    return "\n".join(lines)


def warp_views(record: StepRecord, slot: int, decode: Decode) -> tuple[go.Figure, str]:
    """(the warp's figure, the race in words) of token ``slot`` of ``record.emitted`` (-1: its last, clamped to
    the pass's tokens); a notice and '' where the pass did not sample or recorded no verdicts."""
    if not record.sampled or not record.verdicts:
        return notice_figure("Greedy: each token is the argmax of the raw softmax, no warp and no draw. Sample "
                             "(temperature above 0) to see how a token is drawn.", height=260), ""
    slot = min(slot, len(record.verdicts) - 1) if slot >= 0 else len(record.verdicts) - 1
    choice = sampled_choice(record, slot)
    title = f"Pass {record.index}, token {slot + 1}: {token_label(decode, choice.drawn.token, 20)} drawn"
    return warp_figure(choice, title, decode), race_story(choice, decode)
