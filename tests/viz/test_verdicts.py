"""What the verifier said, shown: a chat token's and a struck draft's hover in words, confidence and near
ties in the token's style, the inspector's bars, the draft tree's sizes and the next pass's drafts."""

import html
import re

from viz_records import decode, generation, verdict, with_verdicts

from viz.alternatives import OTHER_COLOR, alternatives_figure
from viz.draft_tree import draft_tree_figure, marker_size
from viz.explain import next_drafts_table
from viz.palette import BONUS_COLOR, NEAR_TIE_COLOR, REJECTED_COLOR, depth_color
from viz.tokens import output_html
from viz.verdicts import chosen_sentence, percent, rejected_sentence


def titles(page: str) -> list[str]:
    return [html.unescape(t) for t in re.findall(r'title="([^"]*)"', page)]


def test_a_tokens_hover_gives_its_probability_against_the_runner_up_and_names_a_near_tie():
    record = with_verdicts()
    hovers = titles(output_html([record], decode))
    assert "the model gave '.' 62 %, the runner-up ' x' 20 %\n" in hovers[0]
    assert "the model gave '\\n' 41 %, the runner-up ' hat' 38 %: a near tie" in hovers[1]
    assert hovers[2].startswith("pass 1 (tree) · bonus") and "the model gave '<script>' 50 %" in hovers[2]
    assert hovers[3] == ("pass 1: draft rejected at the bonus position (rank 0, p=0.23)\n"
                         "the model gave '<script>' 50 %, the draft ' a' 30 %")


def test_without_verdicts_the_hover_is_as_before():
    hovers = titles(output_html([generation()[1]], decode))
    assert not any("the model gave" in hover for hover in hovers) and len(hovers) == 4


def test_confidence_fades_the_ink_and_a_near_tie_is_outlined_keeping_the_pass_colours():
    page = output_html([with_verdicts()], decode)
    styles = re.findall(r'class="bita-tok[^"]*" style="([^"]*)"', page)
    assert [s.split(";")[0] for s in styles] == [f"background-color:{depth_color(1)}",
                                                 f"background-color:{depth_color(2)}", f"background-color:{BONUS_COLOR}"]
    assert "color:rgba(17,17,17,0.77)" in styles[0] and "color:rgba(17,17,17,0.65)" in styles[1]
    assert [f"dashed {NEAR_TIE_COLOR}" in s for s in styles] == [False, True, False]


def test_a_sample_drawn_below_the_favourite_says_so():
    drawn = verdict(5, 0.1, 3, 0.6)
    assert chosen_sentence(drawn, decode) == "the model gave ' the' 10 %, its favourite ' sat' 60 %"
    assert rejected_sentence(drawn, drawn.runner_up, decode) == "the model gave ' the' 10 %, the draft ' sat' 60 %"
    assert [percent(p) for p in (0.4149, 0.042, 0.0004, 1.0)] == ["41 %", "4.2 %", "<0.1 %", "100 %"]


def test_the_inspectors_bars_are_the_rows_top_alternatives_and_the_drafts_it_turned_down():
    record = with_verdicts()
    first = alternatives_figure(record, 0, decode)
    bars = first.data[0]
    assert list(first.layout.yaxis.ticktext) == [".", "␣x", "&amp;"]  # top 2, then the draft outside them
    assert list(bars.x) == [0.62, 0.2, 0.01] and list(bars.marker.color) == [depth_color(1), REJECTED_COLOR,
                                                                             REJECTED_COLOR]
    assert "Pass 1, token 1" in first.layout.title.text and len(first.data) == 1
    last = alternatives_figure(record, -1, decode)
    assert "near tie" not in last.layout.title.text and "&lt;script&gt;" in last.layout.title.text
    assert "near tie" in alternatives_figure(record, 1, decode).layout.title.text
    record.sampled = True
    sampled = alternatives_figure(record, 1, decode)
    assert [trace.name for trace in sampled.data] == ["drawn from", "raw softmax"]
    assert OTHER_COLOR in list(sampled.data[0].marker.color)  # ' hat': neither chosen nor a draft here
    assert "recorded no verdicts" in alternatives_figure(generation()[1], 0, decode).layout.annotations[0].text


def test_the_draft_tree_sizes_nodes_by_the_verifiers_probability_and_says_it():
    figure = draft_tree_figure(with_verdicts(), decode)
    traces = {trace.name: trace for trace in figure.data if trace.mode == "markers+text"}
    assert list(traces["accepted"].marker.size) == [marker_size(0.62), marker_size(0.41)]
    rejected = traces["rejected"]  # nodes 1, 2, 4, 5 (all checked: turned down at a row of the walk)
    assert list(rejected.marker.size) == [marker_size(p) for p in (0.2, 0.01, 0.05, 0.3)]
    assert "the verifier: 20 %" in rejected.hovertext[0]
    assert list(traces["bonus (model's own)"].marker.size) == [marker_size(0.5)]
    assert "the verifier: 50 %" in traces["bonus (model's own)"].hovertext[0]
    assert "size: the verifier's probability" in figure.layout.title.text
    unrecorded = draft_tree_figure(generation()[2], decode)  # nothing accepted: sized by draft probability
    sizes = {trace.name: trace.marker.size for trace in unrecorded.data if trace.mode == "markers+text"}
    assert list(sizes["rejected"])[0] == marker_size(0.45)


def test_the_next_passs_drafts_are_a_table_per_depth():
    record = generation()[1]
    record.next_drafts = [[(4, 0.5), (10, 0.25)], [(5, 0.9)]]
    table = next_drafts_table(record, decode).splitlines()
    assert table[0] == "The masks after “&lt;script&gt;” drafted the next pass's candidates, top 2 per depth:"
    assert table[2:] == ["| depth | rank 0 | rank 1 |", "|---|---|---|", "| 1 | “␣on” 50 % | “␣dog” 25 % |",
                         "| 2 | “␣the” 90 % |"]
    assert next_drafts_table(generation()[0], decode) == ""
