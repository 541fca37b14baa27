"""Why-it-was-fast figures from hand-made step records: no model needed."""

import pytest
from viz_records import decode, generation

from bita.decode.records import DraftNode
from viz.acceptance import depth_figure, depth_shares, forecast_figure
from viz.draft_tree import draft_tree_figure


def test_depth_shares_count_the_passes_that_reached_each_depth():
    records = generation()  # tree passes accepted 2, 0, 1 and 3 drafts; efficient:3,2,1 feeds 3, 2, 1 per depth
    assert depth_shares(records) == [(1, 0.75, 3.0), (2, 0.5, 2.0), (3, 0.25, 1.0)]
    bars = depth_figure(records).data[0]
    assert list(bars.x) == [1, 2, 3] and list(bars.text) == ["75%", "50%", "25%"]


def test_forecast_bars_put_the_best_on_top_mark_the_choice_and_show_the_measured_rate():
    ranking = (("dynamic:10", 2.1, 40.0), ("efficient:2", 1.8, 38.0))
    figure = forecast_figure(ranking, 25.0, "dynamic:10", measured_rate=36.5, measured_tau=1.9)
    bars = figure.data[0]
    assert list(bars.y) == ["plain AR", "efficient:2", "dynamic:10"] and list(bars.x) == [25.0, 38.0, 40.0]
    assert bars.marker.color[2] != bars.marker.color[1]  # the chosen shape stands out
    assert figure.layout.shapes[0].x0 == pytest.approx(36.5) and "tau 1.90" in figure.layout.title.text


def test_a_dynamic_trees_drafts_show_their_estimated_chance():
    record = generation()[1]
    record.nodes = [DraftNode(n.token, n.parent, n.depth, n.rank, n.prob, n.has_group, n.status, n.source,
                              chance=0.5 / (1 + i)) for i, n in enumerate(record.nodes)]
    figure = draft_tree_figure(record, decode)
    hovers = [h for trace in figure.data if trace.hovertext for h in trace.hovertext]
    assert any("estimated chance 0.50" in h for h in hovers) and "dynamic tree" in figure.layout.title.text
