"""Step records as JSON for ``generate --json``: each pass, its drafts, and what the verifier said of each
emitted token (bita/decode/explain.py), every token id beside its text."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict

from ..decode.explain import Alternative, RowVerdict
from ..decode.records import StepRecord

Decode = Callable[[list[int]], str]
DIGITS = 6  # probabilities and logits are rounded to this many decimals


def token_json(token: int, decode: Decode) -> dict:
    return {"id": token, "text": decode([token])}


def alternative_json(alternative: Alternative, decode: Decode) -> dict:
    """A token at a row: id, text, raw logit, probability in the distribution it was chosen from, raw softmax;
    sampled, the tempered softmax and its race draw."""
    sampled = {} if alternative.noise is None else {"tempered": round(alternative.tempered, DIGITS),
                                                    "noise": round(alternative.noise, DIGITS)}
    return {**token_json(alternative.token, decode), "logit": round(alternative.logit, DIGITS),
            "prob": round(alternative.prob, DIGITS), "raw_prob": round(alternative.raw_prob, DIGITS), **sampled}


def verdict_json(verdict: RowVerdict, decode: Decode) -> dict:
    """The verifier's row that chose one token: the token, the runner-up, the margins between them, the entropy
    (nats), the near-tie rule's verdict and rounding gap, the top alternatives and the drafts turned down;
    sampled, the warp (settings, tokens kept, their tempered mass)."""
    return {"chosen": alternative_json(verdict.chosen, decode), "runner_up": alternative_json(verdict.runner_up, decode),
            "logit_margin": round(verdict.logit_margin, DIGITS), "prob_margin": round(verdict.prob_margin, DIGITS),
            "entropy": round(verdict.entropy, DIGITS), "near_tie": verdict.near_tie,
            "rounding": round(verdict.rounding, DIGITS),
            "top": [alternative_json(a, decode) for a in verdict.top],
            "rejected": [alternative_json(a, decode) for a in verdict.rejected],
            **({} if verdict.warp is None else {"warp": {**asdict(verdict.warp),
                                                         "kept_mass": round(verdict.warp.kept_mass, DIGITS)}})}


def record_json(record: StepRecord, decode: Decode) -> dict:
    """One pass: what it fed and emitted (with each token's role), its draft tree, the next pass's mask drafts,
    its timings, and its verdicts (empty unless recorded)."""
    return {
        "index": record.index, "kind": record.kind, "position": record.position, "rows": record.rows,
        "root": token_json(record.root, decode),
        "emitted": [{**token_json(t, decode), "role": role} for t, role in zip(record.emitted, record.emitted_roles())],
        "nodes": [{**token_json(n.token, decode), "parent": n.parent, "depth": n.depth, "rank": n.rank,
                   "draft_prob": round(n.prob, DIGITS), "source": n.source, "status": n.status, "chance": n.chance}
                  for n in record.nodes],
        "next_drafts": [[{**token_json(t, decode), "prob": round(p, DIGITS)} for t, p in depth]
                        for depth in record.next_drafts],
        "seconds": record.seconds, "pass_seconds": record.pass_seconds, "finish": record.finish,
        "sampled": record.sampled, "verdicts": [verdict_json(v, decode) for v in record.verdicts]}
