"""Coloured output text from hand-built step records: spans, roles, rejected drafts, HTML safety."""

import re

from viz_records import VOCAB, decode, generation, ngram_record, prefill_record

from viz.palette import BONUS_COLOR, REJECTED_COLOR, depth_color
from viz.tokens import legend_html, output_html, token_spans, token_texts


def test_spans_cover_the_output_with_roles_and_passes():
    records = generation()
    spans = token_spans(records, decode)
    emitted = [t for r in records for t in r.emitted]
    assert [s.token for s in spans] == emitted
    assert "".join(s.text for s in spans) == decode(emitted)
    assert [(s.pass_index, s.role) for s in spans] == [
        (0, "bonus"), (1, "accepted-1"), (1, "accepted-2"), (1, "bonus"), (2, "bonus"),
        (3, "accepted-1"), (3, "bonus"), (4, "accepted-1"), (4, "accepted-2")]  # pass 4 cut at a stop


def test_pieces_of_split_characters_and_stripped_leading_spaces_join_to_the_decoded_text():
    def byte_decode(ids):  # byte-level BPE: a token may end inside a character
        return bytes(ids).decode("utf-8", errors="replace")

    tokens = list("héllo → wörld".encode())
    pieces = token_texts(tokens, byte_decode, window=2)
    assert "".join(pieces) == "héllo → wörld" and "\ufffd" not in "".join(pieces)
    assert pieces[1] == "" and pieces[2] == "é"

    words = ["▁Hello", "▁world", "!", "▁again"]

    def sentencepiece_decode(ids):  # drops the leading space of the first token
        return "".join(words[i] for i in ids).replace("▁", " ").removeprefix(" ")

    pieces = token_texts([0, 1, 2, 3, 1], sentencepiece_decode, window=1)
    assert pieces == ["Hello", " world", "!", " again", " world"]


def test_rejected_alternatives_are_the_drafts_that_lost_to_the_bonus():
    prefill, two_accepted, none_accepted, one_accepted, _ = generation()
    assert prefill.rejected_alternatives() == []
    assert [n.token for n in two_accepted.rejected_alternatives()] == [11]  # depth 3 under the last accepted
    assert [(n.token, n.rank) for n in none_accepted.rejected_alternatives()] == [(16, 0), (12, 1), (13, 2)]
    assert [n.token for n in one_accepted.rejected_alternatives()] == [4, 17]


def test_html_colours_each_token_by_role_and_strikes_the_best_rejected_draft():
    records = generation()
    page = output_html(records, decode)
    tokens = re.findall(r'<span class="bita-tok bita-turn-0 bita-pass-(\d+) bita-slot-\d+" '
                        r'style="background-color:([^;]+);[^"]*" title="([^"]*)" data-token="\d+">(.*?)</span>', page)
    assert len(tokens) == sum(len(r.emitted) for r in records)
    assert [int(p) for p, _, _, _ in tokens] == [0, 1, 1, 1, 2, 3, 3, 4, 4]  # the pass a click on the token opens
    assert [c for _, c, _, _ in tokens] == [BONUS_COLOR, depth_color(1), depth_color(2), BONUS_COLOR, BONUS_COLOR,
                                         depth_color(1), BONUS_COLOR, depth_color(1), depth_color(2)]
    assert tokens[3][2].startswith("pass 1 (tree) · bonus") and "&#x27; a&#x27; (rank 0" in tokens[3][2]
    struck = re.findall(rf'<span class="bita-struck bita-pass-(\d+)" style="color:{REJECTED_COLOR};'
                        r'text-decoration:line-through[^>]*>(.*?)</span>', page)
    assert struck == [("1", " a"), ("2", " ok"), ("3", " on")]  # best rank only, per pass with rejected drafts
    assert "<style" not in page and "underline" not in page  # no n-gram drafts here
    assert 'class="bita-tok bita-turn-2 bita-pass-4 bita-slot-1"' in output_html(records, decode, turn=2)


def test_html_escapes_token_text_and_renders_newlines_as_breaks():
    page = output_html(generation(), decode)
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert "<br>" in page and "\n" not in page.split('title="')[0]
    assert output_html(generation(), decode, show_rejected=False).count("line-through") == 0


def test_legend_names_every_colour():
    legend = legend_html(depths=3)
    assert all(c in legend for c in (depth_color(1), depth_color(2), depth_color(3), BONUS_COLOR, REJECTED_COLOR))
    assert "accepted depth 3" in legend and "bonus" in legend


def test_prefill_alone_is_one_bonus_token():
    page = output_html([prefill_record()], decode)
    assert page.count(BONUS_COLOR) == 1 and VOCAB[6] in page and "line-through" not in page


def test_hover_names_the_context_ngram_for_its_drafts():
    html_text = output_html([ngram_record()], decode)
    titles = re.findall(r'title="([^"]*)"', html_text)
    assert "depth 1 (rank 0, p=0.45, and the context n-gram)" in titles[0]
    assert "depth 2 (context n-gram)" in titles[1]
    underlined = re.findall(r'<span class="bita-tok[^"]*" style="[^"]*underline dotted[^"]*"', html_text)
    assert len(underlined) == 2  # both accepted drafts came (also) from the n-gram; the bonus did not
