"""One tree pass against plain sequential forwards on tiny models of every architecture.

(a) every ordinary row (root, candidates) gives the logits an AR forward over its own
prefix gives; every mask group gives what a lone group on that prefix gives;
(b) ordinary rows do not depend on the prompt tokens or the mask tokens.
"""

import pytest
import torch
from conftest import VOCAB, random_prompts

from bita.decode import pass_logits
from bita.decode.masks import decode_layout
from bita.decode.sampling import GREEDY, Sampling
from bita.decode.step import Chains, Decoding, bita_steps, forward_layout, new_cache
from bita.drafts.tree import EMPTY_TREE, ROOT, parse_tree_spec
from bita.model.adapter import BitaAdapter
from bita.runtime.device import output_logits
from bita.runtime.runtime import runtime_of

N_MASKS = 3


def cached_prefix(model, adapter, prompt):
    """Prefill ``prompt`` (with its mask group) and keep only the prompt in the cache."""
    cache = new_cache(runtime_of(model), adapter)
    layout = decode_layout(EMPTY_TREE, adapter.n_masks, len(prompt))
    hidden = forward_layout(runtime_of(model), adapter, cache, layout, torch.tensor(prompt), len(prompt) - 1, 0)
    cache.keep(adapter.n_prompt, list(range(len(prompt))))
    return cache, hidden, layout


def tree_pass_logits(model, adapter, prompt, tree, root, candidates):
    cache, _, _ = cached_prefix(model, adapter, prompt)
    layout = decode_layout(tree, adapter.n_masks)
    hidden = forward_layout(runtime_of(model), adapter, cache, layout, torch.tensor([root] + candidates), len(prompt),
                            len(prompt))
    return output_logits(model, hidden), layout


def lone_group_logits(model, adapter, sequence):
    """Mask-group logits of a prefill over ``sequence``: the reference for any group anchored at its end."""
    _, hidden, layout = cached_prefix(model, adapter, sequence)
    return output_logits(model, hidden[layout.group_rows[0]])


@pytest.mark.parametrize("spec", ["efficient:3,2,2", "full:2,2,2", "chain:3", "efficient:4,3/chain-groups"])
def test_tree_pass_matches_sequential_forwards(tiny, spec):
    tree = parse_tree_spec(spec)
    adapter = BitaAdapter.create(tiny, prompt_tokens=4, mask_tokens=N_MASKS, seed=1)
    generator = torch.Generator().manual_seed(7)
    for prompt in random_prompts(3, seed=3):
        root = int(torch.randint(3, VOCAB, (1,), generator=generator))
        candidates = torch.randint(3, VOCAB, (tree.size,), generator=generator).tolist()
        logits, layout = tree_pass_logits(tiny, adapter, prompt, tree, root, candidates)

        def path(anchor):
            return prompt + [root] + [candidates[a] for a in (tree.ancestors(anchor) if anchor != ROOT else [])]

        for anchor in (ROOT,) + tuple(range(tree.size)):
            reference = tiny(input_ids=torch.tensor([path(anchor)])).logits[0, -1]
            torch.testing.assert_close(logits[layout.node_row(anchor)], reference, atol=1e-4, rtol=1e-4)
        for group, anchor in enumerate(tree.group_anchors):
            torch.testing.assert_close(logits[layout.group_rows[group]], lone_group_logits(tiny, adapter, path(anchor)),
                                       atol=1e-4, rtol=1e-4)


def test_ordinary_rows_ignore_prompts_and_masks(tiny):
    tree = parse_tree_spec("efficient:3,2,2")
    prompt = random_prompts(1, seed=5)[0]
    candidates = list(range(10, 10 + tree.size))
    first = BitaAdapter.create(tiny, prompt_tokens=4, mask_tokens=N_MASKS, seed=1)
    second = BitaAdapter.create(tiny, prompt_tokens=4, mask_tokens=N_MASKS, seed=2)
    with torch.no_grad():
        second.mask_embeddings.mul_(100)
        for key in second.prompt_keys:
            key.mul_(100)
    a, layout = tree_pass_logits(tiny, first, prompt, tree, 5, candidates)
    b, _ = tree_pass_logits(tiny, second, prompt, tree, 5, candidates)
    ordinary = ~layout.is_mask
    torch.testing.assert_close(a[ordinary], b[ordinary], atol=1e-6, rtol=1e-6)
    assert not torch.allclose(a[layout.is_mask], b[layout.is_mask]), "masks must depend on the adapter"


@pytest.mark.parametrize("prompt_style", ["deep", "shallow"])
def test_training_groups_equal_decoding_groups(tiny, prompt_style):
    """A mask group packed in a training sequence gives the logits a decoding pass gives for
    a group anchored at the same token: what is trained is what drafts."""
    from bita.training.objective import SarObjective

    adapter = BitaAdapter.create(tiny, prompt_tokens=4, mask_tokens=N_MASKS, seed=3, prompt_style=prompt_style)
    sequence = random_prompts(1, seed=5, low=20, high=21)[0]
    anchors = torch.tensor([[3, 9, 15]])
    logits, _, _, _ = SarObjective(adapter, tiny).mask_logits(torch.tensor([sequence]), torch.tensor([len(sequence)]),
                                                           anchors)
    for group, anchor in enumerate(anchors[0].tolist()):
        expected = lone_group_logits(tiny, adapter, sequence[: anchor + 1])
        torch.testing.assert_close(logits[0, group * N_MASKS:(group + 1) * N_MASKS], expected, atol=1e-4, rtol=1e-4)


def test_groups_as_deep_as_the_tree_draft_what_full_groups_draft(tiny):
    """Decoding feeds only ``tree.depth`` masks per group: mask i sees no later mask, so the
    shorter group's logits are the first rows of the adapter's full group."""
    tree = parse_tree_spec("efficient:3,2")
    adapter = BitaAdapter.create(tiny, prompt_tokens=4, mask_tokens=N_MASKS, seed=4)
    prompt = random_prompts(1, seed=8)[0]
    candidates = list(range(20, 20 + tree.size))
    cache, _, _ = cached_prefix(tiny, adapter, prompt)
    layout = decode_layout(tree, tree.depth)
    hidden = forward_layout(runtime_of(tiny), adapter, cache, layout, torch.tensor([5] + candidates), len(prompt),
                            len(prompt))
    full, full_layout = tree_pass_logits(tiny, adapter, prompt, tree, 5, candidates)
    assert N_MASKS > tree.depth and layout.rows < full_layout.rows
    for group in range(len(tree.group_anchors)):
        torch.testing.assert_close(output_logits(tiny, hidden[layout.group_rows[group]]),
                                   full[full_layout.group_rows[group][: tree.depth]], atol=1e-5, rtol=1e-5)


def test_one_head_call_on_a_gpu_and_on_a_cpu_up_to_16_group_rows_gives_the_same_logits(monkeypatch):
    from conftest import tiny_model

    assert pass_logits.one_head_call(torch.device("cuda"), 1000)
    assert pass_logits.one_head_call(torch.device("cpu"), 16) and not pass_logits.one_head_call(torch.device("cpu"), 17)
    model = tiny_model("llama")
    adapter = BitaAdapter.create(model, prompt_tokens=4, mask_tokens=N_MASKS, seed=2)
    tree = parse_tree_spec("efficient:5,5,5")  # far more than 16 group rows: two head calls on a CPU
    prompt = random_prompts(1, seed=4)[0]
    cache, _, _ = cached_prefix(model, adapter, prompt)
    layout = decode_layout(tree, tree.depth, 1)
    ids = torch.randint(3, VOCAB, (1 + tree.size,), generator=torch.Generator().manual_seed(0))
    runtime = runtime_of(model)
    hidden = forward_layout(runtime, adapter, cache, layout, ids, len(prompt), len(prompt))
    split = pass_logits.pass_logits(runtime, hidden, layout, 1 + tree.size)
    monkeypatch.setattr(pass_logits, "one_head_call", lambda device, rows: True)  # what a GPU does
    shared = pass_logits.pass_logits(runtime, hidden, layout, 1 + tree.size)
    torch.testing.assert_close(shared.verified, split.verified)
    for group in range(layout.group_rows.shape[0]):
        torch.testing.assert_close(shared.group(group), split.group(group))
    assert split.every is None and torch.equal(shared.every[1], shared.group(1))  # every group's, from one call


@pytest.mark.parametrize("sampling", [GREEDY, Sampling(temperature=0.8, top_p=0.9, seed=4)], ids=["greedy", "sampled"])
def test_the_walk_on_the_device_gives_the_same_passes_as_the_walk_in_python(monkeypatch, sampling):
    """On a GPU the walk runs as tensor operations with one copy back a pass (device_walk.py); run on a CPU,
    that path emits, accepts and drafts what the walk in Python does, greedy and sampled."""
    from conftest import tiny_model

    from bita.decode.stopping import StopCondition

    model = tiny_model("llama")
    adapter = BitaAdapter.create(model, prompt_tokens=4, mask_tokens=N_MASKS, seed=2)
    prompt, tree = random_prompts(1, seed=6)[0], parse_tree_spec("efficient:3,2,2")

    def passes():
        return list(bita_steps(Decoding(runtime_of(model), adapter, tree, sampling, Chains(ngram_tokens=2)), prompt,
                               StopCondition(24)))

    plain = passes()
    on_device = []
    monkeypatch.setattr(pass_logits, "on_device", lambda device: on_device.append(device) or True)
    monkeypatch.setattr(pass_logits, "one_head_call", lambda device, rows: True)  # as on a GPU: every group's logits
    again = passes()
    assert len(on_device) == len(again) - 1  # every tree pass took the device's walk
    assert [(r.emitted, r.accepted) for r in again] == [(r.emitted, r.accepted) for r in plain]
    for ours, theirs in zip(again, plain):
        assert [[t for t, _ in depth] for depth in ours.next_drafts] == [[t for t, _ in d] for d in theirs.next_drafts]
        torch.testing.assert_close(torch.tensor([[p for _, p in d] for d in ours.next_drafts]),
                                   torch.tensor([[p for _, p in d] for d in theirs.next_drafts]))
