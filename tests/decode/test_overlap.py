"""The overlapped loop (``Decoding.overlap``, on by default on a GPU) run on a CPU: pass k + 1 is launched before
pass k's record is handed over, and the records are those of the loop that runs passes in turn."""

from dataclasses import replace

import pytest
import torch
from conftest import random_prompts, tiny_model

from bita.decode import pass_logits, step
from bita.decode.sampling import GREEDY, Sampling
from bita.decode.step import Chains, Decoding, bita_steps
from bita.decode.stopping import StopCondition
from bita.drafts.tree import parse_tree_spec
from bita.model.adapter import BitaAdapter
from bita.runtime.lean_llama import LeanLlama
from bita.runtime.padded import PaddedLean
from bita.runtime.runtime import Runtime, runtime_of


class CountingForward:
    """A runtime's forward that counts its passes."""

    def __init__(self, forward):
        self.inner, self.passes = forward, 0

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def forward(self, *args, **kwargs):
        self.passes += 1
        return self.inner.forward(*args, **kwargs)


@pytest.fixture(scope="module")
def model():
    return tiny_model("llama")


def decoding_of(model, sampling=GREEDY, overlap=None, **record):
    adapter = BitaAdapter.create(model, prompt_tokens=4, mask_tokens=3, seed=2)
    return Decoding(runtime_of(model), adapter, parse_tree_spec("efficient:3,2,2"), sampling, Chains(ngram_tokens=2),
                    overlap=overlap, **record)


def test_the_loop_overlaps_on_a_gpu_only_unless_told(model):
    decoding = decoding_of(model)
    assert not decoding.overlaps and replace(decoding, overlap=True).overlaps


@pytest.mark.parametrize("sampling", [GREEDY, Sampling(temperature=0.8, top_p=0.9, seed=4)], ids=["greedy", "sampled"])
@pytest.mark.parametrize("stop", ["length", "eos"])
@pytest.mark.parametrize("walk", ["python", "device"])
def test_overlapped_passes_give_the_records_of_passes_in_turn(model, sampling, stop, walk, monkeypatch):
    """Tokens, verdicts, drafts, recorded attention and the verifier's words alike, greedy and sampled, to a length
    and to an EOS the model emits mid-run, with the walk in Python (a CPU's) and queued behind the pass (a GPU's)."""
    if walk == "device":
        monkeypatch.setattr(pass_logits, "on_device", lambda device: True)
        monkeypatch.setattr(pass_logits, "one_head_call", lambda device, rows: True)  # as on a GPU
    decoding = decoding_of(model, sampling, record_attention=True, record_verdicts=True)
    for prompt in random_prompts(3, seed=8):
        def run(overlap, eos=()):
            return list(bita_steps(replace(decoding, overlap=overlap), prompt, StopCondition(30, eos)))
        eos = [[t for r in run(False) for t in r.emitted][12]] if stop == "eos" else []
        in_turn, overlapped = run(False, eos), run(True, eos)
        assert [r.finish for r in overlapped] == [r.finish for r in in_turn]
        for ours, theirs in zip(overlapped, in_turn, strict=True):
            assert (ours.emitted, ours.accepted, ours.bonus, ours.rows, ours.position) == \
                   (theirs.emitted, theirs.accepted, theirs.bonus, theirs.rows, theirs.position)
            assert [(n.token, n.status) for n in ours.nodes] == [(n.token, n.status) for n in theirs.nodes]
            assert ours.next_drafts == theirs.next_drafts and ours.verdicts == theirs.verdicts
            assert (ours.attention is None) == (theirs.attention is None)
            assert ours.attention is None or ours.attention.equal(theirs.attention)


@pytest.mark.parametrize("overlap", [False, True])
def test_the_next_pass_is_launched_before_a_record_is_handed_over(model, overlap):
    """Overlapped, when tree record k reaches its caller pass k + 1 already ran (here: on a CPU it is done), and the
    last record launches nothing past the stop; in turn, only pass k ran."""
    decoding = decoding_of(model, overlap=overlap)
    counting = CountingForward(decoding.runtime.forward)
    decoding = replace(decoding, runtime=replace(decoding.runtime, forward=counting))
    records, passes = [], []
    for record in bita_steps(decoding, random_prompts(1, seed=3)[0], StopCondition(24)):
        records.append(record)
        passes.append(counting.passes)
    assert len(records) > 3 and records[-1].finish == "length"
    ahead = [1 if overlap and record.finish is None and index else 0 for index, record in enumerate(records)]
    assert passes == [index + 1 + extra for index, extra in enumerate(ahead)]
    assert counting.passes == len(records)  # the stop launched nothing more


@pytest.mark.skipif(not torch.cuda.is_available(), reason="whether a launch waits for the device needs a CUDA device")
@pytest.mark.parametrize("sampling", [GREEDY, Sampling(temperature=0.8, top_p=0.9, seed=4)], ids=["greedy", "sampled"])
def test_on_a_gpu_launching_a_pass_never_waits_for_the_device(sampling, monkeypatch):
    """CUDA graphs on the padded forward, the overlapped loop: every ``launch_pass`` runs under torch's sync debug
    mode "error" (a copy from pageable memory, a read of a device value: an error), and the tokens are the ones of
    the loop with its passes in turn."""
    model = tiny_model("llama").cuda()
    runtime = Runtime(model, PaddedLean(LeanLlama(model)))
    adapter = BitaAdapter.create(model, prompt_tokens=4, mask_tokens=3, seed=2).cuda()
    decoding = Decoding(runtime, adapter, parse_tree_spec("efficient:3,2,2"), sampling, Chains(ngram_tokens=2))
    prompt = random_prompts(1, seed=3)[0]
    in_turn = [r.emitted for r in bita_steps(replace(decoding, overlap=False), prompt, StopCondition(24))]
    launch, launches = step.launch_pass, []

    def launch_without_waiting(*args, **kwargs):
        torch.cuda.set_sync_debug_mode("error")
        try:
            launches.append(launch(*args, **kwargs))
            return launches[-1]
        finally:
            torch.cuda.set_sync_debug_mode("default")
    monkeypatch.setattr(step, "launch_pass", launch_without_waiting)
    overlapped = [r.emitted for r in bita_steps(replace(decoding, overlap=True), prompt, StopCondition(24))]
    assert overlapped == in_turn and len(launches) == len(overlapped) - 1
