"""Step records as plain JSON values and back, exactly: what a saved decoding holds of each forward pass.

A pass's attention mask (bool [rows, keys]) is stored as its shape and its bits packed row-major, base64-encoded;
verdicts as their fields. ``step_from_json`` rebuilds the StepRecord and checks that it holds together (``check_step``):
a ValueError, TypeError or KeyError names what does not, for a file cut short or edited by hand.
"""

from __future__ import annotations

import base64
import functools
import math
import types
import typing
from dataclasses import asdict, fields, is_dataclass

import numpy as np
import torch

from ..drafts.sources import SOURCES, parts
from .explain import Alternative, RowVerdict, Warp
from .records import ACCEPTED, REJECTED, DraftNode, StepRecord

KINDS = ("prefill", "tree", "ar")
ROW_KINDS = ("context", "root", "candidate", "mask")
FINISHES = (None, "eos", "stop", "length")
MAX_ID = 2 ** 31  # token ids are below it (a vocabulary's size)
MAX_WHOLE = 2 ** 53  # no count, position or seed of a decoding is larger
MAX_ROWS, MAX_KEYS = 1 << 15, 1 << 18  # a recorded pass's rows and its mask's keys (a prompt's prefill included)
MAX_MASK_CELLS = 1 << 24  # a recorded mask's rows x keys: 2 MB packed, a prefill of 2k rows over 8k keys
MAX_DRAFTS = 512  # a pass's draft nodes (the largest tree a request may ask for is far smaller)


def attention_json(attention: torch.Tensor) -> dict:
    """bool [rows, keys] as {"shape": [rows, keys], "bits": base64 of its bits packed row-major}."""
    bits = np.packbits(attention.bool().cpu().numpy().ravel())
    return {"shape": list(attention.shape), "bits": base64.b64encode(bits.tobytes()).decode("ascii")}


def attention_from_json(data: dict) -> torch.Tensor:
    """``attention_json``'s bool [rows, keys] again; ValueError where the shape is not two whole numbers within
    MAX_ROWS and MAX_KEYS or the bits do not fill it."""
    shape = data["shape"]
    if not (isinstance(shape, list) and len(shape) == 2 and all(map(is_whole, shape)) and 0 <= shape[0] <= MAX_ROWS
            and 0 <= shape[1] <= MAX_KEYS and shape[0] * shape[1] <= MAX_MASK_CELLS and isinstance(data["bits"], str)):
        raise ValueError(f"its attention mask's shape is not [rows <= {MAX_ROWS}, keys <= {MAX_KEYS}] of at most "
                         f"{MAX_MASK_CELLS} cells")
    rows, keys = shape
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


def is_whole(value) -> bool:
    """Whether ``value`` is a whole number (not a bool) within MAX_WHOLE of 0."""
    return isinstance(value, int) and not isinstance(value, bool) and abs(value) <= MAX_WHOLE


def is_id(value) -> bool:
    return is_whole(value) and 0 <= value < MAX_ID


def of_type(value, hint) -> bool:
    """Whether ``value`` is of the annotation ``hint``: bools as bools, ints whole (``is_whole``), floats finite (a
    whole number too), strings, None, lists and tuples of their items' type, dataclasses field by field
    (``mistyped``); a tensor is its own reader's to check."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return any(of_type(value, arg) for arg in args)
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            return False
        if origin is tuple and args[-1] is not Ellipsis:
            return len(value) == len(args) and all(map(of_type, value, args))
        return all(of_type(item, args[0]) for item in value)
    if is_dataclass(hint):
        return isinstance(value, hint) and mistyped(value) is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return is_whole(value)
    if hint is float:
        return (is_whole(value) or isinstance(value, float)) and math.isfinite(value)
    if hint is str:
        return isinstance(value, str)
    return value is None if hint is type(None) else True


@functools.cache
def _field_hints(kind: type) -> dict:
    """The dataclass ``kind``'s fields' annotations, resolved once (``typing.get_type_hints`` evaluates them)."""
    return typing.get_type_hints(kind)


def mistyped(record) -> str | None:
    """The name of the first field of the dataclass ``record`` not of its annotated type (``of_type``), or None."""
    hints = _field_hints(type(record))
    return next((f.name for f in fields(record) if not of_type(getattr(record, f.name), hints[f.name])), None)


def check_step(record: StepRecord) -> None:
    """ValueError unless ``record`` holds together: every field of its type (``mistyped``: it is shown, so nothing
    else reaches a page), its rows and finish ones a pass has, each draft's source a known one, token ids whole
    numbers below MAX_ID, every parent precedes its node,
    the accepted tokens are the accepted path's, the emitted ones a prefix of them and the bonus, each verdict is
    of its emitted token, and the attention mask (where recorded) has a row per fed row and a kind per row."""
    wrong = mistyped(record)
    if wrong is not None:
        raise ValueError(f"its field {wrong!r} (or a field of its drafts or verdicts) is not of its type")
    problems = [
        (record.kind in KINDS, f"kind {record.kind!r} is not one of {', '.join(KINDS)}"),
        (0 <= record.rows <= MAX_ROWS and len(record.nodes) <= MAX_DRAFTS and record.finish in FINISHES,
         f"its rows ({record.rows}, at most {MAX_ROWS}), drafts ({len(record.nodes)}, at most {MAX_DRAFTS}) or "
         "finish is not one a pass has"),
        (all(set(parts(n.source)) <= set(SOURCES) for n in record.nodes), "a draft's source is not one bita names"),
        (all(map(is_id, [record.root, record.bonus, *record.accepted, *record.emitted,
                         *(n.token for n in record.nodes)])), "a token id is not a whole number"),
        (all(-1 <= n.parent < i and n.status in (ACCEPTED, REJECTED)
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
