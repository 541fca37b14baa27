"""Step records as plain JSON values and back, exactly: what a saved decoding holds of each forward pass.

A pass's attention mask (bool [rows, keys]) is stored as its shape and its bits packed row-major, base64-encoded;
verdicts as their fields. ``step_from_json`` rebuilds the StepRecord and checks that it holds together (``check_step``):
a ValueError, TypeError or KeyError names what does not, for a file cut short or edited by hand.
"""

from __future__ import annotations

import base64
from dataclasses import asdict, fields

import numpy as np
import torch

from .explain import Alternative, RowVerdict, Warp
from .records import ACCEPTED, REJECTED, DraftNode, StepRecord

KINDS = ("prefill", "tree", "ar")
ROW_KINDS = ("context", "root", "candidate", "mask")


def attention_json(attention: torch.Tensor) -> dict:
    """bool [rows, keys] as {"shape": [rows, keys], "bits": base64 of its bits packed row-major}."""
    bits = np.packbits(attention.bool().cpu().numpy().ravel())
    return {"shape": list(attention.shape), "bits": base64.b64encode(bits.tobytes()).decode("ascii")}


def attention_from_json(data: dict) -> torch.Tensor:
    """``attention_json``'s bool [rows, keys] again; ValueError where the bits do not fill the shape."""
    rows, keys = (int(n) for n in data["shape"])
    packed = np.frombuffer(base64.b64decode(data["bits"], validate=True), dtype=np.uint8)
    if len(packed) != (rows * keys + 7) // 8:
        raise ValueError(f"the attention mask holds {len(packed)} bytes, not the {(rows * keys + 7) // 8} of "
                         f"{rows} x {keys}")
    return torch.from_numpy(np.unpackbits(packed)[: rows * keys].reshape(rows, keys).astype(bool))


def verdict_from_json(data: dict) -> RowVerdict:
    """A RowVerdict from its fields (``dataclasses.asdict``'s dict)."""
    def alternatives(name: str) -> tuple[Alternative, ...]:
        return tuple(Alternative(**a) for a in data[name])

    warp = data["warp"]
    return RowVerdict(Alternative(**data["chosen"]), alternatives("top"), alternatives("rejected"),
                      float(data["entropy"]), float(data["rounding"]), None if warp is None else Warp(**warp))


def step_json(record: StepRecord) -> dict:
    """Every field of ``record``: its nodes and verdicts as dicts, next drafts as [token, prob] pairs, its attention
    mask packed (``attention_json``; None where not recorded)."""
    found = {f.name: getattr(record, f.name) for f in fields(StepRecord)}
    return {**found, "nodes": [asdict(n) for n in record.nodes],
            "next_drafts": [[[token, prob] for token, prob in depth] for depth in record.next_drafts],
            "attention": None if record.attention is None else attention_json(record.attention),
            "verdicts": [asdict(v) for v in record.verdicts]}


def step_from_json(data: dict) -> StepRecord:
    """``step_json``'s record again, checked (``check_step``); KeyError, TypeError or ValueError where it is not one."""
    plain = {f.name: data[f.name] for f in fields(StepRecord)}
    attention = data["attention"]
    record = StepRecord(**{**plain, "nodes": [DraftNode(**n) for n in data["nodes"]],
                           "next_drafts": [[(token, prob) for token, prob in depth] for depth in data["next_drafts"]],
                           "attention": None if attention is None else attention_from_json(attention),
                           "verdicts": [verdict_from_json(v) for v in data["verdicts"]]})
    check_step(record)
    return record


def is_id(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def check_step(record: StepRecord) -> None:
    """ValueError unless ``record`` holds together: token ids are whole numbers, every parent precedes its node,
    the accepted tokens are the accepted path's, the emitted ones a prefix of them and the bonus, each verdict is
    of its emitted token, and the attention mask (where recorded) has a row per fed row and a kind per row."""
    problems = [
        (record.kind in KINDS, f"kind {record.kind!r} is not one of {', '.join(KINDS)}"),
        (all(map(is_id, [record.root, record.bonus, *record.accepted, *record.emitted,
                         *(n.token for n in record.nodes)])), "a token id is not a whole number"),
        (all(isinstance(n.parent, int) and -1 <= n.parent < i and n.status in (ACCEPTED, REJECTED)
             for i, n in enumerate(record.nodes)), "a draft node's parent or status is not one a tree has"),
    ]
    for holds, problem in problems:
        if not holds:
            raise ValueError(problem)
    if record.accepted != [record.nodes[i].token for i in record.accepted_nodes()]:
        raise ValueError("its accepted tokens are not its accepted drafts'")
    if record.emitted != (record.accepted + [record.bonus])[: len(record.emitted)]:
        raise ValueError("its emitted tokens are not its accepted drafts and bonus")
    if len(record.verdicts) > len(record.emitted) or any(
            v.chosen.token != token for v, token in zip(record.verdicts, record.emitted)):
        raise ValueError("its verdicts are not of its emitted tokens")
    if record.attention is not None and (record.row_kinds is None or len(record.row_kinds) != record.rows
                                         or record.attention.shape[0] != record.rows
                                         or not set(record.row_kinds) <= set(ROW_KINDS)):
        raise ValueError(f"its attention mask is not one of its {record.rows} rows with a kind each")
