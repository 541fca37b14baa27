"""The speedup figure: contours over tau and step cost, the break-even line, the passes timed here and an answer's
point with its expected and raced speedups."""

from bita.plan.autotree import CostTable
from bita.plan.speedup import AnswerPoint
from viz.speedup import speedup_figure

COSTS = CostTable("key", 0.025, [(1, 0.025), (6, 0.032), (16, 0.048)])


def test_the_figure_has_the_surface_the_break_even_line_the_passes_and_the_answer():
    figure = speedup_figure(COSTS, AnswerPoint(2.1, 0.031, 2.1 * 25 / 31, 1.4), "cpu, bfloat16")
    contour, even, passes, labels, answer = figure.data
    assert contour.type == "contour" and len(contour.z) == len(contour.y) and len(contour.z[0]) == len(contour.x)
    assert even.name == "break-even (1x)" and even.y[0] == 25.0  # tau 1 at the AR pass's cost
    assert [y for y in passes.y if y is not None] == [25.0, 25.0, 32.0, 32.0, 48.0, 48.0]
    assert list(labels.text) == ["1 row", "6 rows", "16 rows"]
    assert (answer.x[0], answer.y[0]) == (2.1, 31.0)
    assert "1.69x expected" in answer.hovertext[0] and "the race measured 1.40x" in answer.hovertext[0]
    assert "25.0 ms on cpu, bfloat16" in figure.layout.title.text


def test_without_an_answer_only_the_machine_shows():
    figure = speedup_figure(COSTS, None, "cpu")
    assert "this answer" not in [trace.name for trace in figure.data] and len(figure.data) == 4


def test_the_step_axis_reaches_two_and_a_half_ar_passes_or_the_answers_steps():
    wide = CostTable("key", 0.025, [(1, 0.025), (16, 0.048), (160, 0.4)])
    figure = speedup_figure(wide, None, "cpu")
    assert tuple(figure.layout.yaxis.range) == (20.0, 62.5)  # 160 rows (400 ms) left out
    assert [y for y in figure.data[2].y if y is not None] == [25.0, 25.0, 48.0, 48.0]
    slow = speedup_figure(wide, AnswerPoint(1.5, 0.1, 0.375), "cpu")
    assert slow.layout.yaxis.range[1] == 130.0
