"""Sliding windows cut per layer type, as pure functions; and the training pass's mask rows see
what the decoding pass's do on a windowed model."""

import pytest
import torch
from conftest import WINDOW, WINDOWED_CONFIGS, random_prompts, tiny_model
from transformers import LlamaConfig, MistralConfig

from bita.decode.masks import decode_layout
from bita.decode.step import forward_layout, new_cache
from bita.drafts.tree import EMPTY_TREE
from bita.errors import BitaError
from bita.model.adapter import BitaAdapter
from bita.runtime.device import output_logits
from bita.runtime.layer_masks import FULL, SLIDING, layer_attention_mask, layer_windows, windowed
from bita.runtime.runtime import runtime_of
from bita.training.objective import SarObjective


def test_layer_windows_per_architecture():
    assert layer_windows(LlamaConfig()) == {FULL: None}
    assert layer_windows(MistralConfig(sliding_window=None)) == {FULL: None}
    assert layer_windows(MistralConfig(sliding_window=4096)) == {SLIDING: 4096}
    assert layer_windows(WINDOWED_CONFIGS["gemma3"]()) == {SLIDING: WINDOW, FULL: None}
    assert layer_windows(WINDOWED_CONFIGS["qwen2-window"]()) == {FULL: None, SLIDING: WINDOW}
    config = LlamaConfig()
    config.layer_types = ["full_attention", "chunked_attention"]
    with pytest.raises(BitaError, match="chunked_attention are not supported"):
        layer_windows(config)


def test_window_cuts_by_position_and_spares_the_prompt_slots():
    """Two prompt slots, keys at positions 0..5, then a root at 6 and a draft at depth 1 (position 7)
    and a sibling at depth 1 placed in a later row: window 3 keeps q - k < 3."""
    keys = torch.tensor([0, 1, 2, 3, 4, 5, 6, 7, 7])
    queries = torch.tensor([6, 7, 7])
    allowed = torch.ones(3, 2 + 9, dtype=torch.bool)
    cut = windowed(allowed, queries, keys, 3)
    assert cut[:, :2].all()  # prompt slots
    assert cut[0, 2:].tolist() == [False] * 4 + [True] * 5
    assert cut[1, 2:].tolist() == cut[2, 2:].tolist() == [False] * 5 + [True] * 4
    assert windowed(allowed, queries, keys, None) is allowed
    assert not windowed(torch.zeros_like(allowed), queries, keys, 3).any()  # the window only removes


def test_one_mask_for_one_pattern_and_a_mapping_for_mixed_layers():
    queries, keys = torch.tensor([4, 5]), torch.arange(6)
    allowed = keys[None] <= queries[:, None]  # causal
    single = layer_attention_mask(MistralConfig(sliding_window=2), allowed, queries, keys, torch.float32, "cpu")
    assert single.shape == (1, 1, 2, 6) and ((single == 0).sum(-1) == 2).all()
    mixed = layer_attention_mask(WINDOWED_CONFIGS["gemma3"](), allowed, queries, keys, torch.float32, "cpu")
    assert set(mixed) == {FULL, SLIDING} and torch.equal(mixed[FULL] == 0, allowed[None, None])


@pytest.mark.parametrize("arch", sorted(WINDOWED_CONFIGS))
def test_training_mask_rows_equal_decoding_mask_rows_past_the_window(arch):
    """The SAR objective's packed mask groups and the decoding pass's group, anchored at the same
    token of a context three windows long, give the same logits: what the masks learn is what
    they are asked at decoding time."""
    model = tiny_model(arch)
    adapter = BitaAdapter.create(model, prompt_tokens=4, mask_tokens=3, seed=2)
    sequence = random_prompts(1, seed=7, low=3 * WINDOW, high=3 * WINDOW + 1)[0]
    anchor = len(sequence) - 4
    trained, _, _, _ = SarObjective(adapter, model).mask_logits(
        torch.tensor([sequence]), torch.tensor([len(sequence)]), torch.tensor([[WINDOW, anchor]]))
    layout = decode_layout(EMPTY_TREE, 3, anchor + 1)
    with torch.inference_mode():
        runtime = runtime_of(model)
        hidden = forward_layout(runtime, adapter, new_cache(runtime, adapter), layout,
                                torch.tensor(sequence[:anchor + 1]), anchor, 0)
    torch.testing.assert_close(trained[0, 3:], output_logits(model, hidden[anchor + 1:]), atol=1e-4, rtol=1e-4)
