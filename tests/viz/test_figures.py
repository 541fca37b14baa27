"""Draft-tree, attention and tokens-per-pass figures from hand-built step records."""

import pytest
from viz_records import N_MASKS, N_PROMPT, PROMPT, decode, generation, long_record, ngram_record, prefill_record

from bita.decode.records import StepRecord
from viz import attention
from viz.attention import attention_figure, cell_codes, key_columns, row_labels, thinned_ticks
from viz.draft_tree import draft_tree_figure
from viz.palette import ATTENTION_COLORS, BONUS_COLOR, REJECTED_COLOR, ROOT_COLOR, depth_color, role_color
from viz.passes import tokens_per_pass_figure
from viz.race import lane_curve, race_figure


def markers(figure):
    return {trace.name: trace for trace in figure.data if trace.mode == "markers+text"}


def test_tree_has_a_marker_per_node_plus_root_and_bonus_coloured_by_status():
    record = generation()[1]  # nodes 0 and 3 accepted, bonus under node 3
    traces = markers(draft_tree_figure(record, decode))
    assert sum(len(t.x) for t in traces.values()) == len(record.nodes) + 2
    assert traces["root (fed)"].marker.color == ROOT_COLOR
    assert list(traces["accepted"].marker.color) == [depth_color(1), depth_color(2)]
    assert list(traces["accepted"].text) == [".", "↵"]
    assert traces["rejected"].marker.color == REJECTED_COLOR and len(traces["rejected"].x) == 4
    bonus = traces["bonus (model's own)"]
    assert bonus.marker.color == BONUS_COLOR and list(bonus.x) == [3] and list(bonus.text) == ["&lt;script&gt;"]
    points = [(x, y) for t in traces.values() for x, y in zip(t.x, t.y)]
    assert len(set(points)) == len(points)  # siblings never overlap


def test_tree_with_nothing_accepted_hangs_the_bonus_off_the_root():
    traces = markers(draft_tree_figure(generation()[2], decode))
    assert "accepted" not in traces and list(traces["bonus (model's own)"].x) == [1]
    assert "p=0.450" in traces["rejected"].hovertext[0] and "rank 0" in traces["rejected"].hovertext[0]


def test_tree_of_a_pass_without_drafts_is_root_and_bonus():
    figure = draft_tree_figure(prefill_record(), decode)
    assert set(markers(figure)) == {"root (fed)", "bonus (model's own)"}
    assert "no draft tree" in figure.layout.title.text


def test_long_pass_collapses_prompt_slots_and_old_cache():
    record = long_record()
    rows = row_labels(record, decode)
    columns = key_columns(record, rows, decode)
    assert len(rows) == 65 and [c.label for c in columns[:2]] == [f"P prompt slots ({N_PROMPT})", "… 292 cached"]
    codes = cell_codes(record.attention, columns)
    assert tuple(codes.shape) == (65, 2 + 8 + 65)
    offset = N_PROMPT + 300 - 8  # heatmap column 2 is original column offset
    assert ((codes[:, 2:] > 0) == record.attention[:, offset:]).all()
    is_mask = [kind == "mask" for kind in record.row_kinds]
    assert (codes[:, 0] > 0).tolist() == is_mask and (codes[:, 1] > 0).all()
    assert rows[0] == "root ␣sat" and rows[13] == "mask 0 @ root" and rows[17] == "mask 0 @ ␣The"


def test_long_pass_heatmap_thins_ticks_and_grows_with_rows():
    figure = attention_figure(long_record(), decode, context_tokens=[5] * 300)
    heatmap = figure.data[0]
    assert len(heatmap.z) == 65 and len(heatmap.z[0]) == 75 and heatmap.zmax == len(ATTENTION_COLORS) - 0.5
    assert len(figure.layout.yaxis.tickvals) == 33 and list(figure.layout.yaxis.tickvals[:2]) == [0, 2]
    assert list(figure.layout.xaxis.ticktext[:3]) == ["P prompt slots (16)", "… 292 cached", "␣the"]
    assert len(figure.layout.xaxis.tickvals) <= 41 and figure.layout.height > attention_figure(
        generation()[1], decode).layout.height
    assert heatmap.text[0][2] == "root ␣sat → ␣the: allowed<br>cached context: every row sees it"
    assert thinned_ticks(list("abc")) == ([0, 1, 2], ["a", "b", "c"])
    assert thinned_ticks(list("abcde"), limit=2, keep=[1]) == ([0, 1, 3], ["a", "b", "d"])


def test_a_mask_past_the_hover_bound_is_drawn_without_a_string_a_cell_and_within_a_height(monkeypatch):
    """A pass of many rows (a long prefill, a crafted file) costs no string a cell: memory stays linear in the mask."""
    monkeypatch.setattr(attention, "MAX_HOVER_CELLS", 100)
    figure = attention_figure(long_record(), decode, context_tokens=[5] * 300)
    assert figure.data[0].text is None and figure.data[0].hoverinfo == "x+y+z" and len(figure.data[0].z) == 65
    monkeypatch.setattr(attention, "MAX_HEIGHT", 500)
    assert attention_figure(long_record(), decode, context_tokens=[5] * 300).layout.height == 500


def test_prefill_heatmap_labels_prompt_rows_from_context():
    record = prefill_record()
    record.n_prompt = 4
    record.attention = record.attention[:, N_PROMPT - 4:]
    rows = row_labels(record, decode, context_tokens=PROMPT[:-1])
    assert rows == ["␣The", "␣cat", "␣sat", "␣on", "root ␣the"] + [f"mask {i} @ root" for i in range(N_MASKS)]
    columns = key_columns(record, rows, decode)
    assert [c.label for c in columns[:4]] == ["P0", "P1", "P2", "P3"] and len(columns) == 4 + len(rows)
    codes = cell_codes(record.attention, columns)
    assert ((codes > 0) == record.attention).all()  # nothing collapsed
    assert codes[5, 0] == 1 and codes[0, 0] == 0  # a mask row sees the prompt slots, an ordinary row does not
    assert codes[4, 4 + 3] == 3 and codes[4, 4 + 4] == 4  # the root row sees the context row and itself


def test_heatmap_hover_says_why_each_cell_is_on_or_off():
    """efficient:3,2,1 with 3 masks: rows root, nodes 0-5 (3, 4 under 0; 5 under 3), then the
    groups of the root and of each node; columns: prompt slots, 5 cached, then the new rows."""
    record = generation()[1]
    figure = attention_figure(record, decode)
    first_new = len(figure.data[0].z[0]) - record.rows
    why = [[cell.split("<br>")[1] for cell in line] for line in figure.data[0].text]
    new = [line[first_new:] for line in why]
    root, node0, node1, node3 = 0, 1, 2, 4
    group_root, group_node0 = 7, 10  # first mask of each group
    assert why[root][0].startswith("prompt slot: ordinary rows never see it")
    assert why[group_root][0] == "prompt slot: the learned prompt steers the mask rows"
    assert new[root][root] == "itself" and new[root][node0] == "a draft: the root and context never see drafts"
    assert new[node3][node0] == "same path: an ancestor draft"
    assert new[node3][node1].startswith("not on its path") and new[node0][root].startswith("the root and the context")
    assert new[group_node0 + 1][group_node0] == "own group: an earlier mask"
    assert new[group_node0][group_node0 + 1].startswith("own group: a later mask")
    assert new[group_node0][group_root].startswith("another group")
    assert new[group_node0][node0].startswith("same path: its group's anchor")
    assert new[group_root][node0] == "not on its group's path"
    assert new[node0][group_root].startswith("a mask: ordinary rows never see masks")


def test_attention_without_a_recorded_mask_says_how_to_get_one():
    record = generation()[1]
    record.attention = None
    with pytest.raises(ValueError, match="record_attention=True"):
        attention_figure(record, decode)


def test_tokens_per_pass_bars_sum_to_the_output():
    records = generation()
    figure = tokens_per_pass_figure(records)
    bars = [t for t in figure.data if t.type == "bar"]
    assert [b.name for b in bars] == ["accepted-1", "accepted-2", "accepted-3", "bonus"]
    assert [b.marker.color for b in bars] == [role_color(b.name) for b in bars]
    assert sum(sum(b.y) for b in bars) == sum(len(r.emitted) for r in records) == 9
    assert list(bars[-1].y) == [1, 1, 1, 1, 0] and list(bars[2].y) == [0] * 5  # pass 4 stopped before its bonus
    tau = figure.data[-1]
    assert list(tau.x) == [0, 1, 2, 3, 4] and tau.y[-1] == pytest.approx(9 / 5) and tau.y[1] == 2.0


def test_drafts_show_who_proposed_them():
    record = ngram_record()  # ' on' proposed by masks and n-gram, ' the' and ' mat' by the n-gram only
    figure = draft_tree_figure(record, decode)
    accepted = markers(figure)["accepted"]
    assert list(accepted.marker.symbol) == ["square", "diamond"] and list(accepted.text) == ["␣on", "␣the"]
    assert "rank 0, p=0.450, and the context n-gram" in accepted.hovertext[0]
    assert "context n-gram" in accepted.hovertext[1] and "rank" not in accepted.hovertext[1]
    assert "◆ context n-gram" in figure.layout.title.text
    assert "◆" not in draft_tree_figure(generation()[1], decode).layout.title.text
    assert row_labels(record, decode)[1:6] == ["␣on d1r0+ng", "␣dog d1r1", "␣a d2r0", "␣the d2ng", "␣mat d3ng"]


def test_race_chart_steps_each_lane_by_its_passes():
    ar = [StepRecord(index=i, kind="ar", position=i, root=1, rows=1, emitted=[5], seconds=0.05) for i in range(4)]
    bita = generation()
    for record in bita:
        record.seconds = 0.06
    seconds, tokens = lane_curve(ar)
    assert seconds == pytest.approx([0.0, 0.05, 0.1, 0.15, 0.2]) and tokens == [0, 1, 2, 3, 4]
    figure = race_figure([("AR", ar), ("BiTA", bita)])
    lanes = {trace.name.split(":")[0]: trace for trace in figure.data}
    assert list(lanes["BiTA"].y) == [0, 1, 4, 5, 7, 9] and lanes["BiTA"].line.shape == "hv"
    assert lanes["AR"].name == "AR: 20.0 tok/s" and lanes["BiTA"].name == "BiTA: 30.0 tok/s"


def test_figures_fit_a_phone_legend_below_title_wrapped():
    figure = tokens_per_pass_figure(generation())
    assert figure.layout.legend.orientation == "h" and figure.layout.legend.y < 0
    assert figure.layout.title.text.startswith("Tokens per forward pass:<br><sup>9 in 5 passes")
    assert attention_figure(generation()[1], decode).data[0].colorbar.thickness == 10
