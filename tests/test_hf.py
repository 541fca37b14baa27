"""BiTA inside ``model.generate`` (bita/hf.py): greedy output identical to plain ``generate`` on tiny
models of several architectures and on the real default model, a streamer given each pass's tokens,
sampling settings read from transformers' own warpers and reproducible under ``torch.manual_seed``,
and one clear error for what BiTA cannot keep lossless. (The Hub recipe, which needs the installed
package, runs in tests/test_install.py.)"""

import pytest
import torch
from conftest import tiny_model
from transformers import LogitsProcessorList, TextStreamer

from bita.decode.sampling import Sampling
from bita.hf import UnsupportedGeneration, generate, sampling_of
from bita.model.adapter import BitaAdapter
from bita.model.loading import encode_chat

PROMPT = [[5, 9, 13, 7, 5, 9, 13, 7, 21]]


@pytest.mark.parametrize("architecture", ["llama", "qwen2", "gpt2"])
def test_greedy_is_plain_generate_on_tiny_models(architecture):
    model = tiny_model(architecture)
    adapter = BitaAdapter.create(model, prompt_tokens=4, mask_tokens=3, seed=1)
    ids = torch.tensor(PROMPT)
    plain = model.generate(ids, max_new_tokens=24, do_sample=False)
    bita = model.generate(ids, max_new_tokens=24, do_sample=False, custom_generate=generate, adapter=adapter,
                          tree="efficient:3,2,1")
    assert torch.equal(bita, plain)
    out = model.generate(ids, max_new_tokens=8, do_sample=False, custom_generate=generate, adapter=adapter,
                         tree="chain:2", return_dict_in_generate=True)
    assert torch.equal(out.sequences, plain[:, :ids.shape[1] + 8])


class Collected(TextStreamer):
    def __init__(self, tokenizer):
        super().__init__(tokenizer, skip_prompt=True, skip_special_tokens=True)
        self.texts = []

    def on_finalized_text(self, text: str, stream_end: bool = False):
        self.texts.append(text)


def test_the_default_model_through_generate_is_identical_and_streams(default_model):
    tokenizer = default_model.tokenizer
    ids = torch.tensor([encode_chat(tokenizer, [{"role": "user", "content": "List five fruits, one per line."}])])
    plain = default_model.model.generate(ids, max_new_tokens=40, do_sample=False)
    streamer = Collected(tokenizer)
    bita = default_model.model.generate(ids, max_new_tokens=40, do_sample=False, custom_generate=generate,
                                        tree="efficient:2,1", bita_streamer=streamer)  # the shipped adapter
    assert torch.equal(bita, plain)
    assert "".join(streamer.texts) == tokenizer.decode(bita[0, ids.shape[1]:], skip_special_tokens=True)
    assert len(streamer.texts) > 2  # pass by pass, not at the end only


def test_sampling_follows_the_warpers_and_torch_manual_seed(default_model):
    model = default_model.model
    ids = torch.tensor([encode_chat(default_model.tokenizer, [{"role": "user", "content": "Name a colour."}])])
    settings = dict(max_new_tokens=16, do_sample=True, temperature=0.7, top_k=20, top_p=0.9)
    prepared = model._get_logits_processor(model.generation_config.__class__(**settings), ids.shape[1], ids,
                                           None, LogitsProcessorList(), ids.device)
    drawn = sampling_of(prepared, model.generation_config.__class__(**settings))
    assert (drawn.temperature, drawn.top_k, drawn.top_p) == (0.7, 20, 0.9)
    runs = []
    for _ in range(2):
        torch.manual_seed(3)
        runs.append(model.generate(ids, **settings, custom_generate=generate, tree="efficient:2,1"))
    assert torch.equal(runs[0], runs[1]) and runs[0].shape[1] > ids.shape[1]


@pytest.mark.parametrize("settings,message", [
    (dict(repetition_penalty=1.2), "not with RepetitionPenaltyLogitsProcessor"),
    (dict(do_sample=True, min_p=0.1), "MinPLogitsWarper"),
    (dict(min_new_tokens=4), "MinNewTokensLengthLogitsProcessor"),
    (dict(num_return_sequences=2, do_sample=True), "not a batch of 2"),
    (dict(return_dict_in_generate=True, output_scores=True), "not output_scores"),
    (dict(max_time=5.0), "not by MaxTimeCriteria"),
    (dict(drafts="all"), "needs the tokenizer"),
])
def test_what_cannot_stay_lossless_is_refused_in_one_line(settings, message):
    model = tiny_model("llama")
    with pytest.raises(UnsupportedGeneration, match=message) as refused:
        model.generate(torch.tensor(PROMPT), max_new_tokens=8, custom_generate=generate, tree="chain:2", **settings)
    assert "\n" not in str(refused.value)


def test_a_batch_is_refused():
    model = tiny_model("llama")
    with pytest.raises(UnsupportedGeneration, match="one sequence at a time"):
        model.generate(torch.tensor(PROMPT * 2), max_new_tokens=8, custom_generate=generate, tree="chain:2")


def test_greedy_maps_to_greedy():
    assert sampling_of(LogitsProcessorList(), tiny_model("llama").generation_config) == Sampling()
