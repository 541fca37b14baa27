"""The corpus index against brute force, and where its texts come from."""

import json
import random

import numpy as np
import pytest

from bita.drafts.corpus import SEPARATOR, CorpusIndex, chain_lengths, corpus_tokens, suffix_array
from bita.errors import BitaError
from bita.plan import corpus_source as corpus_store
from bita.plan.corpus_source import load_corpus


def random_documents(seed: int, count: int = 30, vocab: int = 5) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(vocab) for _ in range(rng.randrange(1, 40))] for _ in range(count)]


@pytest.mark.parametrize("seed", range(4))
def test_suffix_array_orders_suffixes_by_their_first_tokens(seed):
    tokens = corpus_tokens(random_documents(seed))
    order = suffix_array(tokens, depth=8)
    assert sorted(order.tolist()) == list(range(len(tokens)))
    heads = [tuple(tokens[i:i + 8].tolist()) for i in order]  # shorter (at the end) sorts first, like SEPARATOR
    assert heads == sorted(heads)


def brute_longest(documents, history, max_match):
    best = 0
    for m in range(1, min(max_match, len(history)) + 1):
        suffix = history[-m:]
        if any(d[i:i + m] == suffix for d in documents for i in range(len(d) - m + 1)):
            best = m
    return best


@pytest.mark.parametrize("seed", range(6))
def test_longest_match_and_chain_equal_brute_force(seed):
    documents = random_documents(seed)
    index = CorpusIndex.build(documents, max_match=6)
    rng = random.Random(100 + seed)
    for _ in range(40):
        history = [rng.randrange(5) for _ in range(rng.randrange(1, 12))]
        length, _, _ = index.longest_match(history)
        assert length == brute_longest(documents, history, 6)
        chain, _ = index.propose(history, 3)
        if length < index.min_match:
            assert chain == []
            continue
        # every occurrence's continuation (within its document); the chain follows the majority
        suffix = history[-length:]
        following = [d[i + length:i + length + 3] for d in documents for i in range(len(d) - length + 1)
                     if d[i:i + length] == suffix]
        assert chain == following[0] if len(set(map(tuple, following))) == 1 else True
        assert any(f[:len(chain)] == chain for f in following)  # a real continuation, never across documents
        first = [f[0] for f in following if f]
        if chain:
            assert first.count(chain[0]) == max(first.count(t) for t in set(first))


def test_chains_stop_at_the_end_of_a_document():
    index = CorpusIndex.build([[1, 2, 3], [4, 1, 2, 3, 5, 6]])
    assert index.propose([9, 1, 2], 4) == ([3, 5, 6], 2)  # 1 2 3 then the first document ends
    assert index.propose([2, 3], 4) == ([5, 6], 2)  # the only occurrence with a continuation
    assert index.propose([7, 3], 4) == ([], 1)  # a one-token match is too weak
    assert SEPARATOR not in index.propose([1, 2, 3], 8)[0]


def test_the_gate_drafts_the_depths_whose_chance_is_high_enough_at_each_match_length():
    rates = [[0.0] * 4, [0.0] * 4, [0.3, 0.1, 0.0, 0.0], [0.7, 0.5, 0.35, 0.2], [0.9, 0.8, 0.7, 0.6]]
    assert chain_lengths(rates, 0.4, 4) == (0, 0, 0, 2, 4)
    assert chain_lengths(rates, 0.4, 3) == (0, 0, 0, 2, 3)
    assert chain_lengths(rates, 0.0, 4) == (4,) * 5  # threshold 0: every chain in full
    index = CorpusIndex.build([[1, 2, 3, 4, 5, 6], [7, 8, 3, 4, 9]])
    assert index.propose([2, 3, 4], (0, 0, 1, 3)) == ([5, 6], 3)  # a 3-token match may draft 3
    assert index.propose([8, 2, 3, 4], (0, 0, 1, 3)) == ([5, 6], 3)
    assert index.propose([0, 3, 4], (0, 0, 1, 3)) == ([5], 2)  # a 2-token match drafts 1
    assert index.propose([1, 2, 3, 4, 5], (0, 0, 1, 3)) == ([6], 5)  # longer than the table: its last


def test_corpus_from_plain_text_and_jsonl(tmp_path, monkeypatch):
    monkeypatch.setenv("BITA_CACHE", str(tmp_path / "cache"))

    class Characters:  # a stand-in tokenizer: one token per character
        def __len__(self):
            return 256

        def __call__(self, text, add_special_tokens=False):
            return {"input_ids": [ord(c) for c in text]}

    text = tmp_path / "notes.txt"
    text.write_text("the cat sat\n\non the mat\n")
    index = load_corpus(str(text), Characters())
    assert index.propose([ord(c) for c in "xthe c"], 3)[0] == [ord(c) for c in "at "]
    lines = tmp_path / "texts.jsonl"
    lines.write_text(json.dumps({"text": "hello world"}) + "\n")
    assert load_corpus(str(lines), Characters()).propose([ord(c) for c in "lo w"], 3)[0] == [ord(c) for c in "orl"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"title": "no text"}) + "\n")
    with pytest.raises(BitaError, match="no line has a 'text'"):
        load_corpus(str(bad), Characters())
    with pytest.raises(BitaError, match="not found"):
        load_corpus(str(tmp_path / "missing.txt"), Characters())


def test_self_generated_data_indexes_its_train_answers_only_and_is_built_once(tmp_path, monkeypatch):
    monkeypatch.setenv("BITA_CACHE", str(tmp_path / "cache"))
    data = tmp_path / "data.jsonl"
    rows = [{"key": "a", "split": "train", "prompt_ids": [1], "answer_ids": [5, 6, 7, 8]},
            {"key": "b", "split": "heldout", "prompt_ids": [1], "answer_ids": [5, 6, 9, 9]}]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    builds, build = [], CorpusIndex.build
    monkeypatch.setattr(corpus_store.CorpusIndex, "build",
                        classmethod(lambda cls, docs: builds.append(docs) or build(docs)))
    tokenizer = object.__new__(type("T", (), {"__len__": lambda self: 10}))
    index = load_corpus(str(data), tokenizer)
    assert builds == [[[5, 6, 7, 8]]] and index.propose([5, 6], 2)[0] == [7, 8]
    load_corpus.cache_clear()
    again = load_corpus(str(data), tokenizer)  # from the disk cache, memory-mapped
    assert len(builds) == 1 and isinstance(again.tokens, np.memmap)


def test_answers_to_questions_that_copy_a_benchmark_stay_out(tmp_path, monkeypatch):
    monkeypatch.setenv("BITA_CACHE", str(tmp_path / "cache"))
    data = tmp_path / "data.jsonl"
    rows = [{"key": "q1:default", "split": "train", "prompt_ids": [1], "answer_ids": [5, 6, 7]},
            {"key": "q2:default", "split": "train", "prompt_ids": [1], "answer_ids": [5, 6, 8]}]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / corpus_store.LEAKS_FILE).write_text(json.dumps({"sharegpt_ids": ["q1"]}))
    tokenizer = object.__new__(type("T", (), {"__len__": lambda self: 10}))
    assert corpus_store.corpus_documents(data, tokenizer) == [[5, 6, 8]]
