"""Which benchmark questions (MT-Bench first turns, HumanEval prompts) occur among the
ShareGPT questions a self-generated data set answered, as exact or near copies: a question leaks when
at least half of its word 6-grams (or, for questions under 6 words, the question itself) occur in one
ShareGPT question (first or follow-up turn). Writes the leaking samples' question ids beside the
packed data (``leaks.json``), which the corpus index then leaves out (bita/plan/corpus_source.py).

    PYTHONPATH=. python benchmarks/leaks.py assets/data/sharegpt-smollm2
"""

import argparse
import hashlib
import json
import re
from pathlib import Path

from bita.bench.suites import humaneval, mt_bench
from bita.model.samples import unpack_samples
from bita.plan.corpus_source import LEAKS_FILE
from bita.training.data import load_conversations

SHINGLE = 6
SHARE = 0.5


def words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def shingles(tokens: list[str]) -> set[tuple[str, ...]]:
    return {tuple(tokens[i:i + SHINGLE]) for i in range(len(tokens) - SHINGLE + 1)} or {tuple(tokens)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data", type=Path, help="a packed self-generated data set")
    args = parser.parse_args()
    answered = {sample["key"].split(":")[0] for sample in unpack_samples(args.data)}
    questions = {}  # qid -> shingles of its first question and its follow-up
    for conversation in load_conversations():
        qid = hashlib.sha1(conversation.question.encode()).hexdigest()[:12]
        if qid in answered:
            texts = [conversation.question] + ([conversation.follow_up] if conversation.follow_up else [])
            questions[qid] = [shingles(words(t)) for t in texts]
    by_shingle: dict[tuple[str, ...], set[str]] = {}
    for qid, sets in questions.items():
        for shingle in set().union(*sets):
            by_shingle.setdefault(shingle, set()).add(qid)
    benches = {name: [p.messages[0]["content"] for p in suite()] for name, suite in
               (("mt-bench", mt_bench), ("humaneval", humaneval))}
    report, leaking = {}, set()
    for suite, texts in benches.items():
        hits = []
        for text in texts:
            own = shingles(words(text))
            counts: dict[str, int] = {}
            for shingle in own:
                for qid in by_shingle.get(shingle, ()):
                    counts[qid] = counts.get(qid, 0) + 1
            matched = sorted(qid for qid, n in counts.items() if n >= SHARE * len(own))
            if matched:
                hits.append({"question": text[:120], "sharegpt_ids": matched})
                leaking.update(matched)
        report[suite] = {"questions": len(texts), "leaking": len(hits), "examples": hits}
    (args.data / LEAKS_FILE).write_text(json.dumps({"rule": __doc__.split("\n\n")[0], "sharegpt_ids": sorted(leaking),
                                                    "per_suite": report}, indent=1) + "\n")
    print(json.dumps({suite: {k: v for k, v in r.items() if k != "examples"} for suite, r in report.items()}))
    left_out = sum(1 for s in unpack_samples(args.data) if s["key"].split(":")[0] in leaking)
    print(f"{len(leaking)} ShareGPT questions ({left_out} samples) left out of the corpus index")


if __name__ == "__main__":
    main()
