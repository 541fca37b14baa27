"""The SAR loss's parts on a tiny model: soft targets come from the right ordinary row, and depth
weights pick rows."""

import random

import pytest
import torch.nn.functional as F
from conftest import random_prompts, tiny_model

from bita.decode.masks import packed_groups
from bita.errors import BitaError
from bita.model.adapter import BitaAdapter
from bita.training.objective import IGNORE, SarObjective, make_batch
from bita.training.train import TrainConfig, depth_weights


@pytest.fixture(scope="module")
def setup():
    model = tiny_model("llama")
    adapter = BitaAdapter.create(model, prompt_tokens=4, mask_tokens=3)
    samples = [{"prompt_ids": p[:6], "answer_ids": p[6:] + [7, 8, 9]} for p in random_prompts(3, seed=5, low=12)]
    batch = make_batch(samples, n_anchors=8, max_length=64, rng=random.Random(0))
    return model, adapter, batch


def test_the_soft_target_of_a_mask_row_is_the_frozen_models_distribution_over_the_same_token(setup):
    model, adapter, batch = setup
    objective = SarObjective(adapter, model, soft_weight=1.0)
    logits, targets, counted, hidden = objective.mask_logits(batch.input_ids, batch.lengths, batch.anchors)
    plain = model(input_ids=batch.input_ids).logits  # [B, T, V]: row t predicts token t + 1
    index = packed_groups(batch.anchors, 3, batch.input_ids.shape[1]).target_index
    teacher = plain.gather(1, (index - 1).clamp(min=0)[..., None].expand(-1, -1, plain.shape[-1]))
    kl = objective.soft_loss(teacher, hidden, batch.input_ids, batch.anchors)
    assert counted.any() and kl[counted].abs().max() < 1e-4  # the same distribution: no divergence
    assert (objective.soft_loss(logits, hidden, batch.input_ids, batch.anchors)[counted] > 0).all()


def test_default_loss_is_the_mean_cross_entropy_and_depth_weights_pick_rows(setup):
    model, adapter, batch = setup
    logits, targets, counted, _ = SarObjective(adapter, model).mask_logits(batch.input_ids, batch.lengths,
                                                                           batch.anchors)
    loss = SarObjective(adapter, model)(batch.input_ids, batch.lengths, batch.anchors)[0]
    assert loss.item() == pytest.approx(F.cross_entropy(logits.flatten(0, 1), targets.flatten(),
                                                        ignore_index=IGNORE).item(), rel=1e-5)
    first = SarObjective(adapter, model, depth_weights=(1.0, 0.0, 0.0))(batch.input_ids, batch.lengths,
                                                                        batch.anchors)[0]
    rows = targets[:, 0::3]
    assert first.item() == pytest.approx(F.cross_entropy(logits[:, 0::3].flatten(0, 1), rows.flatten(),
                                                         ignore_index=IGNORE).item(), rel=1e-5)
    mixed = SarObjective(adapter, model, soft_weight=0.5)(batch.input_ids, batch.lengths, batch.anchors)[0]
    assert mixed.item() != pytest.approx(loss.item())


@pytest.mark.parametrize("text", ["1,2", "a,b,c", "0,0,0", "1,-1,1"])
def test_malformed_depth_weights_are_refused(text):
    with pytest.raises(BitaError, match="depth_weights"):
        depth_weights(TrainConfig(mask_tokens=3, depth_weights=text))
    assert depth_weights(TrainConfig(mask_tokens=3, depth_weights="1,0.5,0.25")) == (1.0, 0.5, 0.25)
