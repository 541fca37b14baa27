"""How a sampled token was drawn, shown: the warp's bars with the cut, the race in words, and the notice of a
greedy pass."""

import torch
from viz_records import decode, sampled_record, with_verdicts

from bita.decode.sampled_choice import sampled_choice
from bita.decode.sampling import Sampling
from viz.warp import race_story, warp_views

SAMPLING = Sampling(temperature=0.7, top_k=3, seed=0)
NOISE = torch.tensor([1.0, 1.0, 1.0, 3.0, 1.0, 1.0, 1.0, 1.0, 2.0, 0.2])  # '<script>' (9) wins: 3 and 8 drew large E


def test_the_warp_shows_raw_tempered_and_drawn_bars_with_the_cut_line():
    record = sampled_record(9, [3, 5], [], NOISE, SAMPLING)
    figure, story = warp_views(record, 0, decode)
    raw, tempered, drawn = figure.data
    assert [raw.name, tempered.name] == ["raw softmax", "tempered (÷ 0.7)"] and drawn.name.startswith("p: drawn")
    assert list(drawn.x) == ["␣sat", "↵", "&lt;script&gt;", "␣on", "␣The", "␣the"]  # top 5 by logit, a draft
    assert list(drawn.text[3:]) == ["cut", "cut", "cut"] and "cut" not in drawn.text[:3]  # top-k 3
    assert any(shape.x0 == 2.5 for shape in figure.layout.shapes)  # the cut line after the third token
    assert "top-k 3, top-p 1 kept 3 tokens" in figure.layout.title.text


def test_the_race_in_words_gives_each_drafts_numbers():
    record = sampled_record(3, [8], [], torch.tensor([1.0, 1.0, 1.0, 0.5, 1.0, 1.0, 1.0, 1.0, 2.0, 1.0]), SAMPLING)
    story = race_story(sampled_choice(record, 0), decode)
    assert "- drawn: ' sat': p " in story and "the largest of the vocabulary" in story
    draft = next(line for line in story.splitlines() if line.startswith("- draft"))
    assert draft.startswith("- draft '\\n': p ") and ", E 2.000, p / E " in draft and draft.endswith("**rejected**")


def test_a_greedy_pass_has_no_warp():
    figure, story = warp_views(with_verdicts(), 0, decode)
    assert story == "" and "Greedy" in figure.layout.annotations[0].text
