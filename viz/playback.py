"""A saved decoding as one self-contained HTML page that plays it back, one forward pass a frame; or two side by side,
stepped in step (frame i shows each one's pass i, or its last once it has ended): our AR loop against BiTA, an answer
against its what-if branch.

Each frame shows the answer so far in its pass colours (viz/tokens.py; the pass's new tokens outlined, earlier
struck drafts faded), the pass's draft tree (viz/draft_tree.py), its tree-attention mask (viz/attention.py) and its
verification in sentences (viz/explain.py); the player (viz/player.js) has one set of controls over every decoding
on the page: play and pause, back, forward, a speed and a slider. The page opens from disk with no server and fetches
nothing: Plotly's bundle is inlined once, and it and the frames' figures ride gzip-compressed and base64-encoded,
unpacked by the browser's DecompressionStream (Chrome 80, Firefox 113, Safari 16.4 on): a 128-token answer of the
default model made a 2.1 MB page.
"""

from __future__ import annotations

import base64
import gzip
import html
import json
import re
from functools import cache
from pathlib import Path

import plotly.graph_objects as go
import plotly.io as pio
from plotly.offline import get_plotlyjs
from plotly.utils import PlotlyJSONEncoder

from bita.decode.records import StepRecord
from bita.saved import SavedDecoding

from .attention import attention_figure
from .draft_tree import draft_tree_figure
from .explain import verification_steps
from .labels import Decode
from .notice import notice_figure
from .tokens import legend_html, output_html

HERE = Path(__file__).resolve().parent
PLAYER_SCRIPT, PLAYER_STYLE = HERE / "player.js", HERE / "player.css"
BOLD = re.compile(r"[*][*](.+?)[*][*]")  # Markdown's bold, the one mark-up of the pass's sentences
TEMPLATE = "plotly_white"  # every frame's figures share it: the page carries it once


def packed(text: str) -> str:
    """``text`` gzip-compressed and base64-encoded: what the page's ``inflated`` unpacks."""
    return base64.b64encode(gzip.compress(text.encode("utf-8"), compresslevel=9, mtime=0)).decode("ascii")


@cache
def packed_plotly() -> str:
    """Plotly's bundle (plotly.min.js, 4.8 MB), ``packed`` (about 2 MB)."""
    return packed(get_plotlyjs())


def figure_json(figure: go.Figure) -> dict:
    """``figure`` (drawn on ``TEMPLATE``, as every step-record figure is) as Plotly's JSON, less its template:
    the page applies it."""
    found = figure.to_plotly_json()
    found["layout"].pop("template", None)
    return found


def story_html(record: StepRecord, decode: Decode) -> str:
    """The pass's verification in sentences (``verification_steps``: Markdown whose token texts are already
    escaped, bold its one mark-up) as HTML paragraphs."""
    return "".join("<p>" + BOLD.sub(r"<b>\1</b>", sentence) + "</p>" for sentence in verification_steps(record, decode))


def counted(count: int, thing: str) -> str:
    """'1 row', '9 rows'."""
    return f"{count} {thing}{'s' if count != 1 else ''}"


def frame_title(record: StepRecord, passes: int) -> str:
    """'Pass 3 of 64 (tree): 9 rows fed, 2 tokens emitted, 15.2 ms'."""
    return (f"Pass {record.index} of {passes - 1} ({record.kind}): {counted(record.rows, 'row')} fed, "
            f"{counted(len(record.emitted), 'token')} emitted, {1000 * record.seconds:.1f} ms")


def frame(saved: SavedDecoding, index: int) -> dict:
    """Frame ``index`` of ``saved``: its title, its draft tree's and attention mask's figures (a notice where the
    pass recorded no mask), its verification in sentences."""
    record, decode = saved.steps[index], saved.decode
    attention = (attention_figure(record, decode, saved.context(index)) if record.attention is not None
                 else notice_figure(f"Pass {record.index} recorded no attention mask:<br>"
                                    + ("a plain AR pass, one row, causal attention." if record.kind == "ar"
                                       else "decode with the mask recorded to see it.")))
    return {"title": frame_title(record, len(saved.steps)), "tree": figure_json(draft_tree_figure(record, decode)),
            "attention": figure_json(attention), "story": story_html(record, decode)}


def summary(saved: SavedDecoding) -> str:
    """One line: who decoded what, how many tokens in how many passes, and the settings."""
    origin, passes = saved.origin, len(saved.steps)
    adapter = f" with the adapter {Path(origin.adapter).name}" if origin.adapter else ""
    method = "BiTA" if saved.method == "bita" else "our AR loop"
    return (f"{method} on {origin.model}{adapter}: {len(saved.tokens)} tokens in {passes} forward passes "
            f"(tau {len(saved.tokens) / passes:.2f}), {saved.seconds:.2f} s; {saved.settings.describe()}; "
            f"finish: {saved.finish or 'none'}")


def pane_html(saved: SavedDecoding, frames_id: str) -> str:
    """The views of ``saved``, whose frames the page holds in the element ``frames_id``: its summary, its prompt, the
    shown pass's title, the answer so far, the pass's verification in sentences, its draft tree and attention."""
    answer = output_html(saved.steps, saved.decode, pieces=saved.pieces)
    return f"""<div class="bita-pane" data-frames="{frames_id}">
<p class="bita-summary">{html.escape(summary(saved))}</p>
<details><summary>the prompt ({len(saved.prompt_ids)} tokens, as the model read it)</summary>
<pre>{html.escape(saved.decode(saved.prompt_ids))}</pre></details>
<h2 class="bita-title"></h2>
<div class="bita-answer">{answer}</div>
<div class="bita-story"></div>
<div class="bita-figures"><div class="bita-tree"></div><div class="bita-attention"></div></div>
</div>"""


def player_section(decodings: list[SavedDecoding]) -> str:
    """One set of controls over the panes of ``decodings``, stepped together: frame i shows each one's pass i (its
    last once it has ended), so the frames run to the longer one's last pass."""
    last = max(len(saved.steps) for saved in decodings) - 1
    panes = "\n".join(pane_html(saved, f"bita-frames-{i}") for i, saved in enumerate(decodings))
    return f"""<section class="bita-player">
<div class="bita-controls">
<button type="button" class="bita-back" title="previous pass (←)">◀ Back</button>
<button type="button" class="bita-play" title="play or pause (space)">▶ Play</button>
<button type="button" class="bita-forward" title="next pass (→)">Forward ▶</button>
<label>speed <select class="bita-speed">{''.join(
        f'<option value="{v}"{" selected" if v == 2 else ""}>{v}</option>' for v in (0.5, 1, 2, 4, 8, 30))}</select>
passes/s</label>
<input type="range" class="bita-frame" min="0" max="{last}" value="0" aria-label="forward pass">
<span class="bita-counter">pass 0 of {last}</span>
</div>
<div class="bita-panes">
{panes}
</div>
</section>"""


def frames_json(saved: SavedDecoding) -> str:
    """Every frame of ``saved`` as JSON (figures without their template: the page carries it once)."""
    return json.dumps([frame(saved, i) for i in range(len(saved.steps))], cls=PlotlyJSONEncoder)


def packed_script(element_id: str, packed_text: str) -> str:
    """A <script> element holding ``packed_text`` (``packed``), which the player unpacks by its id."""
    return f'<script type="application/gzip+base64" id="{element_id}">{packed_text}</script>'


def playback_html(saved: SavedDecoding, beside: SavedDecoding | None = None) -> str:
    """The page that plays ``saved`` back, and ``beside`` it (where given) another decoding in step, pass for pass:
    one file, no server, nothing fetched."""
    decodings = [saved] if beside is None else [saved, beside]
    template = json.dumps(pio.templates[TEMPLATE].to_plotly_json(), cls=PlotlyJSONEncoder)
    scripts = "\n".join([packed_script("bita-plotly", packed_plotly()),
                         packed_script("bita-template", packed(template)),
                         *(packed_script(f"bita-frames-{i}", packed(frames_json(one)))
                           for i, one in enumerate(decodings))])
    title = html.escape(f"{saved.origin.model}: {saved.text[:60]}")
    heading = "A decoding" if beside is None else "Two decodings side by side"
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title><style>{PLAYER_STYLE.read_text()}</style></head>
<body class="bita-panes-{len(decodings)}">
<h1>{heading}, one forward pass at a time</h1>
{legend_html()}
{player_section(decodings)}
<p class="bita-loading">Unpacking the figures… (this page needs a browser with DecompressionStream: Chrome 80,
Firefox 113, Safari 16.4 or later)</p>
{scripts}
<script>{PLAYER_SCRIPT.read_text()}</script>
</body></html>
"""
