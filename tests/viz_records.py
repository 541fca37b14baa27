"""Hand-built StepRecords of a short BiTA generation for the viz tests (no model needed)."""

from __future__ import annotations

import math

from bita.decode.explain import Alternative, RowVerdict
from bita.decode.masks import decode_layout
from bita.decode.records import ACCEPTED, REJECTED, DraftNode, StepRecord
from bita.decode.step import attach_attention
from bita.drafts.sources import MASK
from bita.drafts.tree import EMPTY_TREE, parse_tree_spec
from bita.drafts.trie import PassTrie, build_trie

VOCAB = ["<pad>", " The", " cat", " sat", " on", " the", " mat", ".", "\n", "<script>", " dog", " a",
         " hat", " ran", " x", "&", " ok", " y"]
N_PROMPT, N_MASKS = 16, 3
PROMPT = [1, 2, 3, 4, 5]


def decode(ids: list[int]) -> str:
    return "".join(VOCAB[i] for i in ids)


def with_attention(record: StepRecord, layout, n_cached: int) -> StepRecord:
    """Fill attention and row kinds as a decoding pass records them."""
    attach_attention(record, layout, record.n_prompt, n_cached, wanted=True)
    return record


def prefill_record() -> StepRecord:
    layout = decode_layout(EMPTY_TREE, N_MASKS, len(PROMPT))
    record = StepRecord(index=0, kind="prefill", position=len(PROMPT) - 1, root=PROMPT[-1], rows=layout.rows,
                        bonus=6, emitted=[6], n_prompt=N_PROMPT)
    return with_attention(record, layout, 0)


def trie_record(index: int, trie: PassTrie, root: int, accepted: list[int], bonus: int, position: int,
                emitted: list[int] | None = None, n_masks: int = N_MASKS) -> StepRecord:
    """A tree pass over ``trie``: ``accepted`` node indices root to leaf."""
    layout = decode_layout(trie.tree, n_masks, 1)
    nodes = [DraftNode(token, n.parent, n.depth, n.rank, round(0.9 / (1 + n.rank + n.depth), 3) if n.rank >= 0 else 0.0,
                       n.has_group, ACCEPTED if i in accepted else REJECTED, source)
             for i, (token, n, source) in enumerate(zip(trie.tokens, trie.tree.nodes, trie.sources))]
    accepted_tokens = [trie.tokens[i] for i in accepted]
    record = StepRecord(index=index, kind="tree", position=position, root=root, rows=layout.rows, nodes=nodes,
                        accepted=accepted_tokens, bonus=bonus,
                        emitted=emitted if emitted is not None else accepted_tokens + [bonus], n_prompt=N_PROMPT)
    return with_attention(record, layout, position)


def tree_record(index: int, spec: str, root: int, tokens: list[int], accepted: list[int], bonus: int,
                position: int, emitted: list[int] | None = None, n_masks: int = N_MASKS) -> StepRecord:
    """A tree pass of mask drafts: ``tokens`` per node of ``spec``, ``accepted`` node indices root to leaf."""
    tree = parse_tree_spec(spec)
    return trie_record(index, PassTrie(tree, tuple(tokens), (MASK,) * tree.size), root, accepted, bonus, position,
                       emitted, n_masks)


def ngram_record() -> StepRecord:
    """Mask drafts of efficient:2,1/chain-groups (' on' | ' dog'; ' a') merged with the n-gram chain
    ' on the mat': node 0 ' on' (both), 3 ' the' and 4 ' mat' (n-gram). ' on the' accepted, bonus '.'."""
    trie = build_trie(parse_tree_spec("efficient:2,1/chain-groups"), [[4, 10], [11]], [4, 5, 6])
    return trie_record(5, trie, root=3, accepted=[0, 3], bonus=7, position=12, n_masks=2)


def generation() -> list[StepRecord]:
    """prefill; 2 accepted + bonus; nothing accepted; 1 accepted + a newline bonus; a pass cut at a stop."""
    # efficient:3,2,1 nodes: 0,1,2 depth 1 (ranks 0..2); 3,4 depth 2 under 0; 5 depth 3 under 3
    return [
        prefill_record(),
        tree_record(1, "efficient:3,2,1", 6, [7, 14, 15, 8, 10, 11], accepted=[0, 3], bonus=9, position=5),
        tree_record(2, "efficient:3,2,1", 9, [16, 12, 13, 3, 4, 5], accepted=[], bonus=2, position=8),
        tree_record(3, "efficient:3,2,1", 2, [3, 13, 10, 4, 17, 5], accepted=[0], bonus=8, position=9),
        tree_record(4, "efficient:3,2,1", 8, [4, 12, 13, 5, 11, 6], accepted=[0, 3, 5], bonus=7, position=11,
                    emitted=[4, 5]),
    ]


def long_record() -> StepRecord:
    """A pass after 300 cached tokens with efficient:5,4,3 and 4 masks: 1 + 12 + 13 * 4 = 65 rows."""
    return tree_record(7, "efficient:5,4,3", 3, list(range(1, 13)), accepted=[0], bonus=2, position=300, n_masks=4)


def verdict(chosen: int, prob: float, runner_up: int, runner_prob: float, rejected: tuple = (),
            near_tie: bool = False, sampled_raw: float | None = None) -> RowVerdict:
    """A hand-made verdict: ``chosen`` at ``prob`` and ``runner_up`` at ``runner_prob`` (the likelier first,
    logits their logs, a near tie where ``near_tie``), ``rejected`` drafts as (token, prob); raw softmax
    ``sampled_raw`` for the chosen token where sampled (else its prob)."""
    picked = Alternative(chosen, math.log(prob), prob, prob if sampled_raw is None else sampled_raw)
    other = Alternative(runner_up, math.log(runner_prob), runner_prob, runner_prob)
    top = (picked, other) if prob >= runner_prob else (other, picked)
    return RowVerdict(picked, top, tuple(Alternative(t, math.log(p), p, p) for t, p in rejected), 1.25,
                      0.2 if near_tie else 0.0)


def with_verdicts() -> StepRecord:
    """generation()[1] with its three rows' verdicts: '.' 62 % (turned down ' x', '&'), '↵' 41 % over ' hat'
    38 %, a near tie (turned down ' dog'), the bonus '<script>' 50 % (turned down ' a' 30 %)."""
    record = generation()[1]
    record.verdicts = [verdict(7, 0.62, 14, 0.2, ((14, 0.2), (15, 0.01))),
                       verdict(8, 0.41, 12, 0.38, ((10, 0.05),), near_tie=True),
                       verdict(9, 0.5, 11, 0.3, ((11, 0.3),))]
    return record


SAMPLED_LOGITS = [[0.0, 1.0, 0.5, 4.0, 2.0, -1.0, 0.0, 0.2, 3.5, 3.0]]  # over VOCAB's first 10 tokens


def sampled_record(chosen: int, drafts: list[int], accepted: list[int], noise, sampling) -> StepRecord:
    """A one-row tree pass sampled over SAMPLED_LOGITS with ``sampling`` and race draws ``noise`` [10]:
    ``accepted`` drafts, then ``chosen``'s row (the only one recorded), which checked ``drafts``."""
    import torch

    from bita.decode.explain import row_verdicts

    verdict = row_verdicts(torch.tensor(SAMPLED_LOGITS), [chosen], [drafts], sampling, torch.float32, [noise])[0]
    return StepRecord(index=1, kind="tree", position=5, root=0, rows=4, accepted=accepted, bonus=chosen,
                      emitted=[chosen], sampled=True, verdicts=[verdict])
