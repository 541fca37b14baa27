"""Greedy BiTA replayed on a suite's answers without decoding: tau, rows a pass and the expected
tokens/s of draft policies, a few seconds each once the answers are scored, to try a draft source
before building it into the decoder.

Greedy BiTA emits the greedy answer whatever it drafts, and every draft is a function of the
prefix: the mask group anchored at the last accepted token (scored teacher-forced over prompt +
answer, as calibration does: bita/training/calibration.py), the n-gram chain over prompt + output,
the corpus chain. So a policy's passes follow from the answer alone: a pass accepts the longer of
its mask path (the tree walked with the true tokens' draft ranks) and its chains' right prefixes,
emits that and its bonus, and drafts masks next unless its path ended on a node without a group.
Rows count a chain's tokens past what it shares with the other chain or with the mask path;
expected tokens/s price each pass's rows on this machine's pass costs, timed here at every row
count up to 16 (``--costs``).

    PYTHONPATH=. .venv/bin/python benchmarks/replay.py --suite mt-bench --answers answers.jsonl \\
        [--per-category 3] [--costs] [--policies both all ...]
"""

import argparse
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm import tqdm

from bita.bench.suites import load_prompts
from bita.decode.autoregressive import ar_steps
from bita.decode.masks import layout_rows
from bita.decode.stopping import make_stop
from bita.decode.verify import shared_prefix
from bita.drafts.corpus import chain_lengths
from bita.drafts.ngram import NgramIndex
from bita.drafts.tree import EMPTY_TREE, DraftTree, parse_tree_spec
from bita.model.loading import encode_chat, load_model
from bita.model.shipped import resolve_adapter
from bita.plan.acceptance import walk_outcome
from bita.plan.corpus_source import adapter_corpus_path, load_corpus
from bita.plan.costs import measure_pass_costs
from bita.training.calibration import heldout_passes

Chain = Callable[[list[int]], list[int]]  # history (prompt + output, root last) -> a chain below the root


def greedy_answers(loaded, prompts, max_new_tokens: int, path: Path) -> list[dict]:
    """Each prompt's ids and our AR loop's greedy answer, cached in ``path`` (JSON lines, resumable)."""
    done = {}
    if path.exists():
        done = {(r := json.loads(line))["id"]: r for line in path.read_text().splitlines() if line.strip()}
    with path.open("a") as out:
        for prompt in tqdm(prompts, desc="greedy answers", unit="prompt"):
            if prompt.id in done:
                continue
            ids = encode_chat(loaded.tokenizer, list(prompt.messages))
            answer = [t for r in ar_steps(loaded.runtime, ids, make_stop(loaded, max_new_tokens)) for t in r.emitted]
            done[prompt.id] = {"id": prompt.id, "category": prompt.category, "prompt_ids": ids, "answer_ids": answer}
            out.write(json.dumps(done[prompt.id]) + "\n")
            out.flush()
    return [done[p.id] for p in prompts]


def mask_ranks(adapter, model, sample: dict) -> dict[int, tuple[int, ...]]:
    """Anchor position -> the true tokens' ranks among the mask group's drafts there (complete anchors)."""
    sequence = sample["prompt_ids"] + sample["answer_ids"]
    scored = heldout_passes(adapter, model, [sample], max_length=len(sequence))  # anchors: every position
    n = adapter.n_masks
    anchors = [a for a in range(len(sample["prompt_ids"]) - 1, len(sequence) - 2) if a + 1 + n < len(sequence)]
    assert len(anchors) == scored.ranks.shape[0], (len(anchors), scored.ranks.shape)
    return {a: tuple(r) for a, r in zip(anchors, scored.ranks.tolist())}


@dataclass(frozen=True)
class Policy:
    """A mask tree and chains; ``chains`` are tried each pass in order (all go into the trie)."""

    name: str
    tree: str | DraftTree  # a spec, or EMPTY_TREE: no mask drafts
    chains: tuple[Chain, ...] = ()
    tails: tuple[Chain, ...] = ()  # chains hung below every mask candidate (their history: up to it)


def replay(sample: dict, ranks: dict[int, tuple[int, ...]], policy: Policy) -> tuple[int, list[int], list[int]]:
    """(tokens emitted, tokens per pass, rows per pass) of ``policy`` on one answer, the prefill a
    one-token pass of the prompt's rows (not counted in rows)."""
    tree = parse_tree_spec(policy.tree) if isinstance(policy.tree, str) else policy.tree
    sequence, start = sample["prompt_ids"] + sample["answer_ids"], len(sample["prompt_ids"])
    anchor, drafted, per_pass, rows = start - 1, True, [1], []
    while anchor + 2 < len(sequence):
        history, truth = sequence[:anchor + 2], sequence[anchor + 2:]
        chains = [chain(history) for chain in policy.chains]
        rights = [shared_prefix(c, truth) for c in chains]
        true_ranks = ranks.get(anchor) if drafted else None
        masks, groupless = walk_outcome(tree, true_ranks) if true_ranks else (0, False)
        tail_rows = 0
        if policy.tails and drafted and tree.size:
            tails = [tail(history + truth[:max(masks, 1)]) for tail in policy.tails]
            tail_rows = tree.size * len(max(tails, key=len))  # every candidate's, as long as the true one's
            if masks:
                extension = max(shared_prefix(t, truth[masks:]) for t in tails)
                masks, groupless = masks + extension, groupless or extension > 0
        right = max(rights, default=0)
        emitted = min(max(masks, right) + 1, len(truth))
        rows.append(trie_rows(tree, drafted, chains, rights, masks) + tail_rows)
        per_pass.append(emitted)
        drafted = not (right > masks or groupless)
        anchor += emitted
    return sum(per_pass), per_pass, rows


def trie_rows(tree: DraftTree, drafted: bool, chains: list[list[int]], rights: list[int], masks: int) -> int:
    """A pass's rows: the mask tree's layout (a draftless pass: the root's group alone), then each
    chain's tokens past what it shares with an earlier chain or, where it is right that far, with the
    accepted mask path (``masks`` tokens)."""
    rows = layout_rows(tree if drafted else EMPTY_TREE, tree.depth)
    for index, (chain, right) in enumerate(zip(chains, rights)):
        shared = max([shared_prefix(chain, other) for other in chains[:index]] + [min(masks, right)])
        rows += len(chain) - shared
    return rows


def ngram_chain(tokens: int, max_match: int = 3) -> Chain:
    return lambda history: NgramIndex(history, max_match).propose(tokens)


def occurrences(history: list[int], n: int) -> list[int]:
    """Where the continuations of the earlier occurrences of ``history``'s last n tokens begin, in order."""
    suffix = history[-n:]
    return [i + n for i in range(len(history) - n) if history[i:i + n] == suffix]


def longest_occurring(history: list[int], max_match: int) -> tuple[int, list[int]]:
    """(n, occurrences) of the longest suffix of at most ``max_match`` tokens that occurred before; (0, [])."""
    for n in range(min(max_match, len(history) - 1), 0, -1):
        if ends := occurrences(history, n):
            return n, ends
    return 0, []


def frequent_chain(tokens: int, max_match: int = 3) -> Chain:
    """The n-gram chain by majority: at each depth the token most of the longest matching suffix's
    occurrences still on the chain continue with (ties: the latest)."""
    def propose(history: list[int]) -> list[int]:
        ends, chain = longest_occurring(history, max_match)[1], []
        for depth in range(tokens):
            following = [(history[end + depth], end) for end in ends if end + depth < len(history)]
            if not following:
                break
            counts: dict[int, tuple[int, int]] = {}
            for token, end in following:
                count, latest = counts.get(token, (0, -1))
                counts[token] = (count + 1, max(latest, end))
            chain.append(best := max(counts, key=counts.get))
            ends = [end for token, end in following if token == best]
        return chain
    return propose


def gated_ngram(lengths: tuple[int, ...]) -> Chain:
    """The n-gram chain (the latest occurrence's), ``lengths[n]`` tokens where the longest matching suffix has n."""
    def propose(history: list[int]) -> list[int]:
        n, ends = longest_occurring(history, len(lengths) - 1)
        return history[ends[-1]:ends[-1] + lengths[n]] if ends else []
    return propose


def corpus_chain(index, lengths) -> Chain:
    return lambda history: index.propose(history, lengths)[0]


def dense_costs(loaded, adapter, max_rows: int = 16) -> Callable[[int], float]:
    """Seconds of a pass by rows: AR, then ``efficient:K/chain-groups`` (K + 3 rows) for 4..max_rows rows."""
    specs = [f"efficient:{k}/chain-groups" for k in range(1, max_rows - 2)]
    measured = measure_pass_costs(loaded, adapter, specs, repeats=10)
    xs, ys = [m["rows"] for m in measured], [m["seconds"] for m in measured]
    print("pass costs (rows: ms):", ", ".join(f"{x}: {1000 * y:.1f}" for x, y in zip(xs, ys)))
    return lambda rows: float(np.interp(rows, xs, ys))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--suite", default="mt-bench")
    parser.add_argument("--per-category", type=int, default=None)
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--answers", type=Path, required=True, help="greedy answers, JSON lines (made once)")
    parser.add_argument("--costs", action="store_true", help="time passes of 1..16 rows for expected tokens/s")
    parser.add_argument("--policies", nargs="*", default=None)
    args = parser.parse_args()
    loaded = load_model("default", "cpu")
    adapter, _ = resolve_adapter(loaded, None)
    prompts = load_prompts(args.suite, limit=args.limit, per_category=args.per_category)
    samples = greedy_answers(loaded, prompts, args.max_new_tokens, args.answers)
    ranks = [mask_ranks(adapter, loaded.model, s) for s in tqdm(samples, desc="mask ranks", unit="answer")]
    index = load_corpus(str(adapter_corpus_path(adapter.config.training)), loaded.tokenizer)
    rates = adapter.config.acceptance["corpus"]["rates"]
    gated = corpus_chain(index, chain_lengths(rates, 0.2, 4))
    policies = [Policy("masks", "efficient:2"),
                Policy("ngram:4 alone", EMPTY_TREE, (ngram_chain(4),)),
                Policy("both (efficient:2 + ngram:4)", "efficient:2", (ngram_chain(4),)),
                Policy("all (+ corpus:4@0.2)", "efficient:2", (ngram_chain(4), gated)),
                Policy("masks+corpus@0.2", "efficient:2", (gated,)),
                Policy("ngram+corpus@0.2", EMPTY_TREE, (ngram_chain(4), gated)),
                Policy("all-ungated", "efficient:2", (ngram_chain(4), corpus_chain(index, 4))),
                Policy("corpus@0.2 alone", EMPTY_TREE, (gated,)),
                Policy("ngram-match5", "efficient:2", (ngram_chain(4, 5), gated)),
                Policy("ngram-match8", "efficient:2", (ngram_chain(4, 8), gated)),
                Policy("ngram-frequent", "efficient:2", (frequent_chain(4), gated)),
                Policy("ngram-frequent5", "efficient:2", (frequent_chain(4, 5), gated)),
                Policy("ngram6", "efficient:2", (ngram_chain(6), gated)),
                Policy("ngram8", "efficient:2", (ngram_chain(8), gated)),
                Policy("corpus@0.1", "efficient:2", (ngram_chain(4), corpus_chain(index, chain_lengths(rates, 0.1, 4)))),
                Policy("corpus@0.3", "efficient:2", (ngram_chain(4), corpus_chain(index, chain_lengths(rates, 0.3, 4)))),
                Policy("efficient3-all", "efficient:3", (ngram_chain(4), gated)),
                Policy("chain1-all", "chain:1", (ngram_chain(4), gated)),
                Policy("tails-ngram2", "efficient:2", (ngram_chain(4), gated), (ngram_chain(2),)),
                Policy("tails-ngram3", "efficient:2", (ngram_chain(4), gated), (ngram_chain(3),)),
                Policy("tails-corpus2", "efficient:2", (ngram_chain(4), gated), (corpus_chain(index, chain_lengths(rates, 0.2, 2)),)),
                Policy("chain1-tails-ngram3", "chain:1", (ngram_chain(4), gated), (ngram_chain(3),)),
                Policy("chain1-tails-both3", "chain:1", (ngram_chain(4), gated), (ngram_chain(3), corpus_chain(index, chain_lengths(rates, 0.2, 3)))),
                Policy("ngram-gate-0124", "efficient:2", (gated_ngram((0, 1, 2, 4)), gated)),
                Policy("ngram-gate-0244", "efficient:2", (gated_ngram((0, 2, 4, 4)), gated)),
                Policy("ngram-gate-0044", "efficient:2", (gated_ngram((0, 0, 4, 4)), gated))]
    cost = dense_costs(loaded, adapter) if args.costs else None
    for policy in policies:
        if args.policies and policy.name.split()[0] not in args.policies:
            continue
        tokens, passes, rows = 0, 0, []
        for sample, sample_ranks in zip(samples, ranks):
            emitted, per_pass, pass_rows = replay(sample, sample_ranks, policy)
            tokens, passes, rows = tokens + emitted, passes + len(per_pass), rows + pass_rows
        line = f"{policy.name:40s} tau {tokens / passes:.3f}  rows {np.mean(rows):.2f} (max {max(rows)})"
        if cost:
            seconds = cost(1) + sum(cost(r) for r in rows)  # the prefill priced as an AR pass
            line += f"  {tokens / seconds:.1f} tok/s expected (AR {1 / cost(1):.1f})"
        print(line)


if __name__ == "__main__":
    main()
