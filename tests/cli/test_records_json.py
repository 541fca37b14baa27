"""generate --json's verdicts: a sampled one carries each token's tempered probability and race draw, and the warp."""

import torch
from viz_records import decode, sampled_record

from bita.cli.records_json import verdict_json
from bita.decode.sampling import Sampling


def test_a_sampled_verdict_carries_the_warp_and_each_tokens_tempered_probability_and_draw():
    noise = torch.tensor([1.0, 1.0, 1.0, 0.5, 1.0, 1.0, 1.0, 1.0, 2.0, 1.0])
    verdict = sampled_record(3, [8], [], noise, Sampling(temperature=0.7, top_k=3, seed=0)).verdicts[0]
    found = verdict_json(verdict, decode)
    assert found["warp"]["temperature"] == 0.7 and found["warp"]["top_k"] == 3 and found["warp"]["kept"] == 3
    assert 0 < found["warp"]["kept_mass"] <= 1
    assert found["chosen"]["noise"] == 0.5 and found["rejected"][0]["noise"] == 2.0
    assert found["chosen"]["tempered"] > found["chosen"]["raw_prob"]  # a temperature below 1 sharpens
