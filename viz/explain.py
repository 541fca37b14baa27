"""One pass's verification told in sentences, generated from its step record: for teaching.

Algorithm 1 walks the draft tree from the root: at each depth the model's own next token
(the argmax of the row of the last accepted token) is compared with the candidates hanging
there; a match is accepted and the walk goes on below it, otherwise the model's token is the
pass's bonus and the walk ends. A sampled pass (``record.sampled``) walks the same way, but each
candidate is tried against the model's distribution and accepted with its probability, and the
bonus is drawn (bita/decode/verify.py). Under the sentences, the drafts the pass's masks made for the
next pass, as a table. Pure: the record and a token decoder in, Markdown out.
"""

from __future__ import annotations

from collections.abc import Iterator

from bita.decode.records import ACCEPTED, DraftNode, StepRecord
from bita.drafts.tree import ROOT

from .labels import Decode, draft_origin, token_label
from .verdicts import percent


def quoted(decode: Decode, token: int) -> str:
    """A token in quotes, whitespace made visible ('“␣the”'), HTML-escaped for Markdown."""
    return f"“{token_label(decode, token, limit=24)}”"


def verification_steps(record: StepRecord, decode: Decode) -> list[str]:
    """[sentence] per verification step of ``record`` (Markdown), the last one the pass's total."""
    bonus = quoted(decode, record.bonus)
    own = "the model draws" if record.sampled else "the model's own next token is"
    if record.kind == "prefill":
        return [f"The prefill pass reads the whole prompt; after its last token {quoted(decode, record.root)} "
                f"{own} {bonus}, the first token of the answer, and the mask group "
                "after it drafts the candidates of the next pass."]
    if record.kind == "ar" or not record.nodes:
        return [f"A plain AR pass: after {quoted(decode, record.root)} {own} {bonus}; "
                "nothing was drafted, so the pass emits that one token."]
    if record.sampled:
        return sampled_steps(record, decode)
    steps = []
    for depth, previous, children, hit in walk(record):
        own = quoted(decode, hit.token if hit else record.bonus)
        lead = f"{depth}. After {quoted(decode, previous)} the model's own next token is {own}"
        if hit is not None:
            steps.append(f"{lead} = the depth-{depth} candidate ({draft_origin(hit)}): **accepted**.")
        elif children:
            proposed = ", ".join(quoted(decode, n.token) for n in children)
            steps.append(f"{lead}; the depth-{depth} candidates were {proposed}: **rejected**, and {own} is "
                         "this pass's bonus token.")
        else:
            steps.append(f"{lead}; nothing was drafted deeper, so {own} is this pass's bonus token.")
    return steps + [total(record, "the bonus") + "."]


def walk(record: StepRecord) -> Iterator[tuple[int, int, list[DraftNode], DraftNode | None]]:
    """The verification walk of a tree pass replayed (``StepRecord.accepted_nodes``), root to leaf:
    per depth (from 1), the token it follows, the candidates hanging there in the order the walk
    tries them, and the accepted one; the last depth has none accepted."""
    tree, path = record.draft_tree(), record.accepted_nodes()
    for depth, parent in enumerate((ROOT,) + path, start=1):
        previous = record.root if parent == ROOT else record.nodes[parent].token
        children = [record.nodes[c] for c in tree.children.get(parent, ())]
        yield depth, previous, children, record.nodes[path[depth - 1]] if depth <= len(path) else None


def total(record: StepRecord, bonus: str) -> str:
    """The pass's closing sentence, without its full stop: rows fed, tokens emitted."""
    emitted = len(record.accepted) + 1
    return (f"One forward pass of {record.rows} rows emitted {emitted} token{'s' if emitted > 1 else ''} "
            f"({len(record.accepted)} accepted + {bonus})")


def sampled_steps(record: StepRecord, decode: Decode) -> list[str]:
    """The sentences of a sampled pass: per depth, the token the race picked at that row (the one AR
    sampling draws at that position with this seed, bita/decode/verify.py), the candidate equal to it
    accepted, then the bonus the race picked at the last accepted row."""
    steps = []
    for depth, previous, children, hit in walk(record):
        lead = (f"{depth}. After {quoted(decode, previous)} the race (the model's probabilities against this "
                "position's random draw) picked")
        if hit is not None:
            steps.append(f"{lead} the depth-{depth} candidate {quoted(decode, hit.token)} ({draft_origin(hit)}): "
                         "**accepted**.")
        else:
            lost = ", ".join(quoted(decode, n.token) for n in children)
            steps.append(f"{lead} the bonus {quoted(decode, record.bonus)}"
                         + (f"; the candidates {lost} lost." if lost else "."))
    return steps + [total(record, "the bonus") + ", the tokens AR sampling draws with this seed."]


def cell(decode: Decode, token: int, prob: float) -> str:
    """A draft in a Markdown table's cell: the token quoted and its probability (a '|' would split the cell)."""
    return f"{quoted(decode, token)} {percent(prob)}".replace("|", "&#124;")


def draft_order(record: StepRecord, count: int) -> str:
    """How a pass's mask drafts were chosen, ``count`` a depth (bita/decode/mask_drafts.py): greedy the most probable;
    sampled raced (the first is the token the race with that position's draw picks from the masks' distribution)."""
    if record.sampled:
        return (f"{count} per depth, raced: the first is what the race with that position's random draw picks from "
                "the masks' own probabilities, so it is the token sampling emits wherever the masks agree with the "
                "model")
    return f"top {count} per depth"


def next_drafts_table(record: StepRecord, decode: Decode) -> str:
    """The mask group's drafts for the next pass as a Markdown table, one row per depth (depth d: the d-th
    token after the bonus), each draft with its probability, in their rank order (``draft_order``); '' where the pass
    drafted none."""
    if not record.next_drafts:
        return ""
    ranks = max(len(drafts) for drafts in record.next_drafts)
    rows = [f"| {depth} | " + " | ".join(cell(decode, token, prob) for token, prob in drafts) + " |"
            for depth, drafts in enumerate(record.next_drafts, start=1)]
    return "\n".join([f"The masks after {quoted(decode, record.bonus)} drafted the next pass's candidates, "
                      f"{draft_order(record, ranks)}:", "",
                      "| depth | " + " | ".join(f"rank {rank}" for rank in range(ranks)) + " |",
                      "|---" * (ranks + 1) + "|", *rows])


def mask_proposals(previous: StepRecord, record: StepRecord) -> list[list[tuple[int, float, str]]]:
    """Per depth (from 1), the mask group's top-k that drafted ``record``'s candidates (``previous.next_drafts``),
    each as (token, draft probability, what became of it in ``record``: 'accepted', 'rejected' where it was fed
    and turned down, 'not fed' where the tree left it out). Empty where ``record`` had no mask drafts."""
    mask_nodes = sorted((n for n in record.nodes if n.rank >= 0), key=lambda n: n.status == ACCEPTED)
    fed = {(n.depth, n.token): n.status for n in mask_nodes}  # a token fed twice at a depth: accepted wins
    return [[(token, prob, fed.get((depth, token), "not fed")) for token, prob in drafts]
            for depth, drafts in enumerate(previous.next_drafts, start=1)] if record.kind == "tree" else []


def mask_proposals_table(previous: StepRecord, record: StepRecord, decode: Decode) -> str:
    """``mask_proposals`` as a Markdown table, one row per depth, each proposal with its probability and what
    became of it (✓ accepted, ✗ rejected, – not fed); '' where there are none."""
    proposals = mask_proposals(previous, record)
    if not any(proposals):
        return ""
    marks = {"accepted": "✓", "rejected": "✗", "not fed": "–"}
    ranks = max(len(depth) for depth in proposals)
    rows = [f"| {depth} | " + " | ".join(f"{cell(decode, token, prob)} {marks[fate]}" for token, prob, fate in drafts)
            + " |" for depth, drafts in enumerate(proposals, start=1)]
    return "\n".join([f"The masks of pass {previous.index} proposed this pass's candidates, "
                      f"{draft_order(previous, ranks)} (✓ accepted, ✗ rejected, – not fed):", "",
                      "| depth | " + " | ".join(f"rank {rank}" for rank in range(ranks)) + " |",
                      "|---" * (ranks + 1) + "|", *rows])
