"""Generated text coloured by how each token came out: accepted draft at depth d, or a pass's bonus.

Every forward pass emits its accepted drafts (depth 1, 2, ...) and then its bonus token (the
model's own prediction after them). Hover text on each token names its pass and role, says what
the verifier gave it against the runner-up where the record carries verdicts (viz/verdicts.py), and
lists the drafts that pass rejected for its bonus position; the best of those is shown struck through.
Accepted drafts that the context n-gram proposed are underlined. With verdicts, a token's text is
fainter the less sure the model was of it, and a near tie has a dashed red outline; the background
stays the pass's colour. Each token's span carries the classes ``bita-tok bita-turn-T bita-pass-N
bita-slot-K`` (K: its place among the pass's tokens), so a page can open pass N of answer T on a click.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass

from bita.decode.explain import RowVerdict
from bita.decode.records import BONUS, DraftNode, StepRecord, accepted_role
from bita.decode.text_pieces import token_texts
from bita.drafts.sources import CORPUS, NGRAM
from bita.drafts.sources import parts as source_parts

from .labels import Decode, draft_origin
from .palette import CORPUS_COLOR, NEAR_TIE_COLOR, REJECTED_COLOR, depth_color, role_color
from .verdicts import chosen_sentence, rejected_sentence, turned_down

_TOKEN_STYLE = "background-color:{color};color:{ink};border-radius:3px;padding:0 1px"
_INK = "#111"
_NEAR_TIE_STYLE = f";outline:2px dashed {NEAR_TIE_COLOR};outline-offset:-1px"
_REJECTED_STYLE = (f"color:{REJECTED_COLOR};text-decoration:line-through;opacity:0.75;"
                   "font-size:0.85em;margin:0 2px")
_NGRAM_STYLE = ";text-decoration:underline dotted 2px;text-underline-offset:3px"
_CORPUS_STYLE = f";text-decoration:underline wavy {CORPUS_COLOR} 2px;text-underline-offset:3px"
_BOX_STYLE = ("font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;white-space:pre-wrap;"
              "word-break:break-word;line-height:1.8")


def ink(prob: float | None) -> str:
    """Text colour of a token the model gave ``prob``: the fainter the less (alpha 0.4 + 0.6 p); full for None."""
    return _INK if prob is None else f"rgba(17,17,17,{0.4 + 0.6 * prob:.2f})"


def token_style(role: str, source: str | None, verdict: RowVerdict | None) -> str:
    """A token's inline style: background by role, ink by confidence, underline by source, outline at a near tie."""
    prob = verdict.chosen.prob if verdict is not None else None
    tie = _NEAR_TIE_STYLE if verdict is not None and verdict.near_tie else ""
    return _TOKEN_STYLE.format(color=role_color(role), ink=ink(prob)) + source_style(source) + tie


def bonus_verdict(record: StepRecord) -> RowVerdict | None:
    """The verdict of the row that chose the pass's bonus (where its drafts were rejected), None where the
    record carries none or the pass ended before its bonus."""
    slot = len(record.accepted)
    return record.verdicts[slot] if slot < len(record.verdicts) else None


def source_style(source: str | None) -> str:
    """Extra style of an accepted token by who proposed it: none for the masks (and the bonus),
    a dotted underline for the context n-gram, an orange wavy one for the corpus (either with the masks)."""
    found = source_parts(source) if source else ()
    return _CORPUS_STYLE if CORPUS in found else _NGRAM_STYLE if NGRAM in found else ""


@dataclass(frozen=True)
class TokenSpan:
    """One emitted token: its piece of the output text, the pass (``StepRecord.index``) that
    emitted it, and its role: BONUS or ``accepted_role(depth)``."""

    token: int
    text: str
    pass_index: int
    role: str


def token_spans(records: Sequence[StepRecord], decode: Decode,
                pieces: Sequence[str] | None = None) -> list[TokenSpan]:
    """One TokenSpan per emitted token of ``records``, in output order; ``pieces``: their texts where known (a saved
    decoding's), else ``token_texts`` of ``decode``."""
    tokens = [t for r in records for t in r.emitted]
    owners = [(r.index, role) for r in records for role in r.emitted_roles()]
    texts = token_texts(tokens, decode) if pieces is None else pieces
    return [TokenSpan(t, text, index, role) for t, text, (index, role) in zip(tokens, texts, owners)]


def _hover(record: StepRecord, role: str, verdict: RowVerdict | None, alternatives: list[DraftNode],
           decode: Decode) -> str:
    if role == BONUS:
        what = "bonus: the model's own next token"
    else:
        depth, path = int(role.rsplit("-", 1)[1]), record.accepted_nodes()
        node = record.nodes[path[depth - 1]] if depth <= len(path) else None
        what = f"accepted draft, depth {depth}" + (f" ({draft_origin(node)})" if node else "")
    said = f"\n{chosen_sentence(verdict, decode)}" if verdict is not None else ""
    lost = ", ".join(f"{decode([n.token])!r} ({draft_origin(n)})" for n in alternatives[:5])
    return f"pass {record.index} ({record.kind}) · {what}{said}\nrejected at the bonus position: {lost or 'none'}"


def _struck_hover(record: StepRecord, draft: DraftNode, decode: Decode) -> str:
    verdict = bonus_verdict(record)
    seen = turned_down(verdict, draft.token) if verdict is not None else None
    said = f"\n{rejected_sentence(verdict, seen, decode)}" if seen is not None else ""
    return f"pass {record.index}: draft rejected at the bonus position ({draft_origin(draft)}){said}"


def output_html(records: Sequence[StepRecord], decode: Decode, show_rejected: bool = True, turn: int | str = 0,
                lead: str = "", pieces: Sequence[str] | None = None) -> str:
    """The output as one <div>: a <span> per emitted token, background by role, underlined when
    the context n-gram proposed it, ink and outline by the verifier's confidence where recorded,
    ``title`` hover text, classes naming ``turn``, its pass and its place in the pass; after each
    pass, its best rejected alternative struck through (when ``show_rejected``; classes ``bita-struck
    bita-pass-N``). A token's span carries its id (``data-token``). Inline styles only; newlines become
    <br>; ``lead``: HTML before the first token; ``pieces``: the tokens' texts where known (``token_spans``)."""
    spans = iter(token_spans(records, decode, pieces))
    parts = [lead]
    for record in records:
        alternatives = record.rejected_alternatives()
        for slot, source in enumerate(record.emitted_sources()):
            span = next(spans)
            verdict = record.verdicts[slot] if slot < len(record.verdicts) else None
            title = html.escape(_hover(record, span.role, verdict, alternatives, decode))
            text = html.escape(span.text).replace("\n", "<br>")
            parts.append(f'<span class="bita-tok bita-turn-{turn} bita-pass-{record.index} bita-slot-{slot}" '
                         f'style="{token_style(span.role, source, verdict)}" title="{title}" data-token="{span.token}">'
                         f'{text}</span>')
        if show_rejected and alternatives:
            best = alternatives[0]
            text = html.escape(decode([best.token]).replace("\n", "↵"))
            title = html.escape(_struck_hover(record, best, decode))
            parts.append(f'<span class="bita-struck bita-pass-{record.index}" style="{_REJECTED_STYLE}" '
                         f'title="{title}">{text}</span>')
    return f'<div style="{_BOX_STYLE}">{"".join(parts)}</div>'


def legend_html(depths: int = 4) -> str:
    """A one-line key: accepted depth 1..``depths``, bonus, n-gram and corpus underlines, faint ink and
    the near-tie outline, rejected draft."""
    chips = [(accepted_role(d), f"accepted depth {d}") for d in range(1, depths + 1)] + [(BONUS, "bonus (model's own)")]
    parts = [f'<span style="{_TOKEN_STYLE.format(color=role_color(role), ink=ink(None))};margin-right:6px">'
             f'{html.escape(text)}</span>' for role, text in chips]
    plain = _TOKEN_STYLE.format(color=depth_color(1), ink=ink(None))
    for style, text in ((_NGRAM_STYLE, "proposed by the context n-gram"),
                        (_CORPUS_STYLE, "proposed by past answers (corpus)"),
                        (f";color:{ink(0.3)}", "faint: the model was unsure"),
                        (_NEAR_TIE_STYLE, "a near tie")):
        parts.append(f'<span style="{plain}{style};margin-right:6px">{text}</span>')
    parts.append(f'<span style="{_REJECTED_STYLE}">rejected draft</span>')
    return f'<div style="{_BOX_STYLE};font-size:0.9em">{"".join(parts)}</div>'
