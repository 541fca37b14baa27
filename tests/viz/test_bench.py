"""Bench figures from a hand-written report: no model needed."""

from viz.bench import pass_cost_figure, speedup_by_category, tau_histogram, write_html


def summary(speedup, tau):
    return {"speedup": speedup, "mean_accepted": tau, "device": "cpu", "tree": "chain:3", "baseline": "hf generate"}


REPORT = {
    "summary": summary(1.25, 2.5),
    "categories": {"coding": summary(1.5, 3.0), "writing": summary(1.0, 2.0)},
    "prompts": [{"mean_accepted": 3.0}, {"mean_accepted": 2.0}, {"mean_accepted": 2.5}],
}


def test_speedup_bars_cover_each_category_and_the_total():
    bars = speedup_by_category(REPORT).data[0]
    assert list(bars.x) == ["coding", "writing", "all"] and list(bars.y) == [1.5, 1.0, 1.25]
    assert "tau 3.00" in bars.text[0]


def test_tau_histogram_has_one_value_per_prompt():
    figure = tau_histogram(REPORT)
    assert list(figure.data[0].x) == [3.0, 2.0, 2.5] and "mean 2.50" in figure.layout.title.text


def test_html_page_inlines_plotly_once(tmp_path):
    costs = [{"tree": "chain:1", "rows": 8, "seconds": 0.09}, {"tree": "chain:3", "rows": 16, "seconds": 0.1}]
    figure = pass_cost_figure(costs, ar_seconds=0.045)
    assert list(figure.data[0].y) == [90.0, 100.0]
    page = write_html([speedup_by_category(REPORT), figure], tmp_path / "out" / "bench.html").read_text()
    assert page.count("<div id=") >= 2 and page.count("plotly.js v") == 1
