"""A decoding saved to one JSON file, to play back and hand out with no model nor tokenizer.

``SavedDecoding`` holds what made it (the model's and adapter's names and weights fingerprints), what was asked
(prompt ids, length, tree, drafts, sampling), what came out (tokens, text) and every forward pass's step record
(bita/decode/record_codec.py), with the text of every token id it names, so a viewer needs no tokenizer. The file
carries a ``format`` number (FORMAT). Reading one back (``parse_saved``, ``read_saved``) checks it whole: bad JSON,
a newer format, a missing field, tokens that are not the passes' emitted tokens each give one BitaError line; read
against a loaded model, so does a decoding another model or adapter made (``check_origin``).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path

import torch

from .decode.record_codec import FINISHES, is_id, mistyped, of_type, step_from_json, step_json
from .decode.records import StepRecord
from .decode.sampling import Sampling
from .decode.text_pieces import token_texts
from .drafts.tree import DraftTree
from .errors import BitaError
from .generate import Request, RunResult
from .model.adapter import BitaAdapter, weights_fingerprint
from .model.loading import LoadedModel
from .plan.tree_plan import TreePlan

FORMAT = 1  # the saved-decoding format this code writes and reads (and every earlier one)
METHODS = ("bita", "ar")  # the decodings with forward passes to save


@dataclass(frozen=True)
class Origin:
    """What made a decoding: the model and adapter (None: our AR loop) by name and weights fingerprint."""

    model: str
    model_fingerprint: str
    adapter: str | None = None
    adapter_fingerprint: str | None = None


@dataclass(frozen=True)
class SavedSettings:
    """What a decoding was asked: at most ``max_new_tokens``, the tree spec it ran ('ar': none), who drafted, and
    its sampling (temperature 0: greedy)."""

    max_new_tokens: int
    tree: str
    drafts: str
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int | None = None

    def __post_init__(self):
        Sampling(self.temperature, self.top_p, self.top_k, self.seed)  # BitaError where out of range

    @property
    def sampling(self) -> Sampling:
        """The sampling settings."""
        return Sampling(self.temperature, self.top_p, self.top_k, self.seed)

    def describe(self) -> str:
        """e.g. 'tree efficient:2+ngram:4, drafts both, greedy, at most 128 new tokens'."""
        return (f"tree {self.tree}, drafts {self.drafts}, {self.sampling.describe()}, "
                f"at most {self.max_new_tokens} new tokens")


@dataclass(frozen=True)
class SavedDecoding:
    """One decoding, complete. ``vocabulary``: the text of each token id it names (``tokenizer.decode([id])``,
    special tokens shown); ``pieces``: [len(tokens)] each token's piece of the answer's text (``token_texts``);
    ``steps``: its forward passes, in order."""

    method: str
    origin: Origin
    prompt_ids: list[int]
    settings: SavedSettings
    tokens: list[int]
    text: str
    finish: str | None
    seconds: float
    vocabulary: dict[int, str]
    pieces: list[str]
    steps: list[StepRecord]

    def decode(self, ids: list[int]) -> str:
        """The text of ``ids`` from ``vocabulary``, token by token (a tokenizer's decode for figure labels)."""
        return "".join(self.vocabulary[i] for i in ids)

    def context(self, index: int) -> list[int]:
        """Ids before the root of pass ``index`` (labels of its attention mask's cached columns)."""
        emitted = [t for step in self.steps[:index] for t in step.emitted]
        return (self.prompt_ids + emitted)[: self.steps[index].position]

    def to_json(self) -> str:
        return json.dumps({"format": FORMAT, "method": self.method, "origin": asdict(self.origin),
                           "prompt_ids": self.prompt_ids, "settings": asdict(self.settings), "tokens": self.tokens,
                           "text": self.text, "finish": self.finish, "seconds": self.seconds,
                           "vocabulary": {str(i): text for i, text in self.vocabulary.items()},
                           "pieces": self.pieces, "passes": [step_json(step) for step in self.steps]})


def adapter_fingerprint(adapter: BitaAdapter) -> str:
    """sha256 over the adapter's tensors by name, rounded to bf16 precision (fp32 and bf16 copies agree)."""
    digest = hashlib.sha256()
    for name, tensor in sorted(adapter.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().to(torch.bfloat16).float().cpu().numpy().tobytes())
    return digest.hexdigest()[:16]


def tree_spec(tree: str | DraftTree | TreePlan) -> str:
    """The spec a request's ``tree`` names: a spec as given, a tree's or a plan's own."""
    return tree if isinstance(tree, str) else tree.spec


def named_ids(prompt_ids: list[int], steps: list[StepRecord]) -> set[int]:
    """Every token id a decoding names: its prompt's, and each pass's root, drafts, emitted tokens, next drafts and
    the alternatives of its verdicts."""
    found = set(prompt_ids)
    for step in steps:
        found.update([step.root, *step.emitted, *(n.token for n in step.nodes),
                      *(token for depth in step.next_drafts for token, _ in depth)])
        found.update(a.token for v in step.verdicts for a in (v.chosen, *v.top, *v.rejected))
    found.discard(-1)  # the bonus of a pass cut before it
    return found


def saved_run(run: RunResult, loaded: LoadedModel, request: Request, adapter: BitaAdapter | None = None,
              adapter_name: str | None = None) -> SavedDecoding:
    """``run`` (what ``collect`` made of ``request`` on ``loaded``; BiTA's with ``adapter``, named ``adapter_name``)
    as a SavedDecoding; BitaError for a run without forward passes (HF generate's)."""
    if run.method not in METHODS or not run.steps:
        raise BitaError(f"a {run.method} run exposes no forward passes to save: save BiTA's or our AR loop's")
    decode = partial(loaded.tokenizer.decode, skip_special_tokens=False)
    bita = run.method == "bita" and adapter is not None
    origin = Origin(loaded.name, weights_fingerprint(loaded.model), adapter_name if bita else None,
                    adapter_fingerprint(adapter) if bita else None)
    sampling = request.sampling or Sampling()
    settings = SavedSettings(request.max_new_tokens, tree_spec(request.tree) if run.method == "bita" else "ar",
                             request.drafts, sampling.temperature, sampling.top_p, sampling.top_k,
                             None if sampling.greedy else sampling.seed)
    return SavedDecoding(run.method, origin, list(request.prompt_ids), settings, run.tokens, run.text, run.finish,
                         run.seconds, {i: decode([i]) for i in sorted(named_ids(request.prompt_ids, run.steps))},
                         token_texts(run.tokens, decode), run.steps)


def steps_of(passes: list) -> list[StepRecord]:
    """The step records of a file's ``passes``; ValueError naming the pass that is not one."""
    steps = []
    for index, data in enumerate(passes):
        try:
            steps.append(step_from_json(data))
        except KeyError as error:
            raise ValueError(f"pass {index} has no field {error}") from None
        except (TypeError, ValueError, AttributeError, OverflowError) as error:
            raise ValueError(f"pass {index}: {error}") from None
    return steps


def decoding_of(data: dict) -> SavedDecoding:
    """A parsed file's SavedDecoding, checked (``check_saved``); KeyError, TypeError or ValueError where it is not."""
    saved = SavedDecoding(
        data["method"], Origin(**data["origin"]), data["prompt_ids"], SavedSettings(**data["settings"]),
        data["tokens"], data["text"], data["finish"], float(data["seconds"]),
        {int(i): text for i, text in data["vocabulary"].items()}, data["pieces"], steps_of(data["passes"]))
    check_saved(saved)
    return saved


def check_saved(saved: SavedDecoding) -> None:
    """ValueError unless ``saved`` holds together: passes numbered in order, its tokens exactly the passes' emitted
    tokens, a text piece per token, and the text of every id it names."""
    emitted = [t for step in saved.steps for t in step.emitted]
    problems = [
        (mistyped(saved.origin) is None and mistyped(saved.settings) is None and isinstance(saved.text, str)
         and of_type(saved.seconds, float) and saved.finish in FINISHES,
         "its origin, settings, text, finish or seconds is not of its type"),
        (saved.method in METHODS, f"method {saved.method!r} is not one of {', '.join(METHODS)}"),
        (saved.steps and [step.index for step in saved.steps] == list(range(len(saved.steps))),
         "its passes are not numbered 0, 1, 2, ..."),
        (all(map(is_id, saved.prompt_ids)) and saved.prompt_ids, "its prompt ids are not token ids"),
        (saved.tokens == emitted, f"its {len(saved.tokens)} tokens are not the {len(emitted)} its passes emitted"),
        (len(saved.pieces) == len(saved.tokens) and all(isinstance(p, str) for p in saved.pieces),
         f"it has {len(saved.pieces)} text pieces for {len(saved.tokens)} tokens"),
        (all(isinstance(text, str) for text in saved.vocabulary.values())
         and named_ids(saved.prompt_ids, saved.steps) <= saved.vocabulary.keys(),
         "its vocabulary lacks the text of a token it names"),
    ]
    for holds, problem in problems:
        if not holds:
            raise ValueError(problem)


def parse_saved(text: str, where: str = "the saved decoding") -> SavedDecoding:
    """The SavedDecoding ``text`` holds (``where``: what to call it in an error); one BitaError line for anything
    else: not JSON, not a saved decoding, a newer format, a missing field, parts that do not hold together."""
    try:
        data = json.loads(text)
    except RecursionError:
        raise BitaError(f"{where} is not a saved decoding: its values are nested too deep") from None
    except ValueError as error:
        raise BitaError(f"{where} is not JSON (cut short or edited?): {error}") from None
    found = data.get("format") if isinstance(data, dict) else None
    if not is_id(found) or found < 1:
        raise BitaError(f"{where} is not a saved decoding: it has no format number")
    if found > FORMAT:
        raise BitaError(f"{where} is a saved decoding of format {found}, newer than this bita reads (format {FORMAT} "
                        "and earlier): update bita-decoding")
    try:
        return decoding_of(data)
    except KeyError as error:
        raise BitaError(f"{where} is not a usable saved decoding: it has no field {error}") from None
    except (TypeError, ValueError, AttributeError, OverflowError, RecursionError, BitaError) as error:
        raise BitaError(f"{where} is not a usable saved decoding: {error}") from None


def check_origin(saved: SavedDecoding, loaded: LoadedModel, adapter: BitaAdapter | None = None) -> None:
    """BitaError unless ``loaded``'s weights (and ``adapter``'s, where both it and ``saved`` name one) made
    ``saved``."""
    origin = saved.origin
    fingerprint = weights_fingerprint(loaded.model)
    if fingerprint != origin.model_fingerprint:
        raise BitaError(f"this decoding was made by {origin.model} (weights {origin.model_fingerprint}), not by the "
                        f"loaded {loaded.name} (weights {fingerprint})")
    if adapter is not None and origin.adapter_fingerprint is not None:
        if adapter_fingerprint(adapter) != origin.adapter_fingerprint:
            raise BitaError(f"this decoding was made with the adapter {origin.adapter} "
                            f"({origin.adapter_fingerprint}), not the one loaded ({adapter_fingerprint(adapter)})")


def read_saved(path: str | Path, loaded: LoadedModel | None = None, adapter: BitaAdapter | None = None,
               where: str | None = None) -> SavedDecoding:
    """The saved decoding in the file ``path``, checked (``parse_saved``; ``where``: what to call the file in an
    error, by default its path), and against ``loaded`` and ``adapter`` where given (``check_origin``)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise BitaError(f"cannot read the saved decoding: {error}") from None
    saved = parse_saved(text, where or str(path))
    if loaded is not None:
        check_origin(saved, loaded, adapter)
    return saved
