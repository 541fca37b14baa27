"""A what-if branch beside its original: the answer from the forced position on, the original's token and
the forced one marked, and the alternatives a clicked token offers to force. Pure: ids, records and a token
decoder in, HTML or (label, value) choices out.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

from bita.decode.records import StepRecord

from .labels import Decode
from .palette import NEAR_TIE_COLOR
from .tokens import output_html
from .verdicts import percent

LEAD_TOKENS = 12  # answer tokens shown before the forced position
_LEAD_STYLE = "color:#888"
_FORCED_STYLE = f"outline:2px solid {NEAR_TIE_COLOR};border-radius:3px;padding:0 1px;font-weight:bold"
_COLUMNS_STYLE = "display:flex;flex-wrap:wrap;gap:12px"
_COLUMN_STYLE = "flex:1 1 300px;min-width:0"


def forced_span(text: str) -> str:
    return f'<span style="{_FORCED_STYLE}">{html.escape(text)}</span>'


def branch_html(answer_ids: Sequence[int], position: int, forced: int, records: Sequence[StepRecord],
                decode: Decode, turn: str) -> str:
    """Two columns: the original answer from ``position`` (its token there outlined) and the branch (the
    ``forced`` token outlined, then its passes' tokens coloured as in the chat, classes naming ``turn`` so a
    click opens them in the inspector), each after the LEAD_TOKENS tokens before ``position``, greyed."""
    before = decode(list(answer_ids[max(0, position - LEAD_TOKENS):position]))
    lead = f'<span style="{_LEAD_STYLE}">…{html.escape(before)}</span>'
    original = (f'<div style="white-space:pre-wrap">{lead}{forced_span(decode([answer_ids[position]]))}'
                f'{html.escape(decode(list(answer_ids[position + 1:])))}</div>')
    branch = output_html(records, decode, turn=turn, lead=lead + forced_span(decode([forced])))
    return (f'<div style="{_COLUMNS_STYLE}"><div style="{_COLUMN_STYLE}"><b>original</b>{original}</div>'
            f'<div style="{_COLUMN_STYLE}"><b>what if: token {position + 1} forced</b>{branch}</div></div>')


def force_choices(record: StepRecord, slot: int, offset: int, decode: Decode) -> list[tuple[str, str]]:
    """What a clicked token offers to force: the other tokens of its row's verdict (its top tokens, then the
    drafts it turned down), as (label, 'POSITION:TOKEN') with POSITION its place in the answer, ``offset`` +
    ``slot`` (``offset``: the answer's tokens before ``record``); none without verdicts."""
    if not 0 <= slot < len(record.verdicts):
        return []
    verdict, position = record.verdicts[slot], offset + slot
    others = {a.token: a for a in (*verdict.top, *verdict.rejected) if a.token != verdict.chosen.token}
    return [(f"{decode([a.token])!r} {percent(a.prob)} (token {position + 1})", f"{position}:{a.token}")
            for a in others.values()]
