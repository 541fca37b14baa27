"""The app's Markdown: the page's introduction, the chat's status line and the race's table."""

from __future__ import annotations

from ..decode.records import StepRecord
from ..decode.sampling import Sampling
from ..decode.verify import shared_prefix
from ..plan.tree_plan import TreePlan
from .race import Lane, drafted, speedup


def introduction(model: str, device: str, exact: bool = True) -> str:
    """The page's heading and what its colours mean; ``exact``: its passes were proved row-invariant
    here, or it runs in fp32, not k-bit (LoadedModel.exact), where greedy answers are AR's token for token."""
    identity = ("Every answer is token-for-token what plain greedy decoding gives in this precision" if exact else
                "In this precision a tree pass was not proved to round as a one-token pass does, so a greedy answer "
                "may part from plain greedy decoding at a near tie (fp32 is the lossless mode)")
    return (f"# BiTA: bi-directional tuning for lossless acceleration\nModel **{model}** on **{device}**. "
            f"{identity} (and a sampled answer, at a temperature above 0, is what AR sampling draws with the "
            "same seed, whatever the tree: the status line names the seed that draws it again); the colours show "
            "which forward pass produced each token and how (hover a token for its "
            "pass and the drafts it beat; click it to inspect that pass).")


def status_line(records: list[StepRecord], plan: TreePlan, sampling: Sampling, device: str) -> str:
    """An answer's tokens, passes, tokens per pass and speed, with its settings and tree."""
    tokens = sum(len(r.emitted) for r in records)
    seconds = sum(r.seconds for r in records)
    rate = tokens / seconds if seconds else 0.0
    return (f"**{tokens} tokens in {len(records)} forward passes** (tau {tokens / max(1, len(records)):.2f}), "
            f"{rate:.1f} tok/s on {device}; {sampling.describe()}. Tree: {plan.reason}."
            + ("" if sampling.greedy else f" Seed {sampling.seed} in Settings draws this answer again, with any tree "
                                          "or plain AR."))


def race_table(ar: Lane, bita: Lane, plan: TreePlan, sampling: Sampling, device: str) -> str:
    """The race so far: a headline (the speedup, or why none is shown) and one row per lane."""
    rows = [f"| {lane.name} | {lane.passes} | {len(lane.tokens) / max(1, lane.passes):.2f} | "
            f"{lane.tokens_per_s:.1f} | {'done' if lane.finished else 'running'} |" for lane in (ar, bita)]
    so_far = "" if ar.finished and bita.finished else " so far"
    if plan.tree is None:
        headline = ("**No speedup shown**: BiTA is not drafting (auto found no tree faster than plain AR on this "
                    "device), so both lanes run the same passes and any difference in tok/s is noise; pick a tree "
                    "in Settings to race drafts")
    elif drafted(bita):
        headline = f"**Speedup {speedup(bita, ar):.2f}x{so_far}** (BiTA tok/s / AR tok/s)"
    else:
        headline = ("**No speedup shown**: no BiTA pass has accepted a draft, so both lanes did the same "
                    "one-token passes and any difference in tok/s is noise")
    return "\n".join([
        f"{headline} on {device}. One AR pass and one BiTA pass in turn, each timed alone; {sampling.describe()}"
        f"{agreement(ar, bita, sampling.greedy)}. BiTA tree: {plan.reason}.", "",
        "| decoder | forward passes | tokens / pass | tok/s | |", "|---|---:|---:|---:|---|", *rows])


SAME_TEXT = "the same text"  # what the race's table says when both lanes finished with one text


def agreement(ar: Lane, bita: Lane, greedy: bool) -> str:
    """Whether both lanes gave the same text, as they should: greedy, BiTA is lossless; sampled, one seed (each
    position races against one vector, bita/decode/verify.py). Where they part, at which token (a near tie
    where a tree row's logits and an AR row's are not bitwise equal, or a bug)."""
    seed = "" if greedy else "one seed: "
    shared = shared_prefix(ar.tokens, bita.tokens)
    if shared < min(len(ar.tokens), len(bita.tokens)) or (ar.finished and bita.finished and ar.tokens != bita.tokens):
        return f" ({'' if greedy else 'one seed, yet '}the lanes' texts part at token {shared + 1})"
    if ar.finished and bita.finished:
        return f" ({seed}both lanes {'gave' if greedy else 'drew'} {SAME_TEXT})"
    return f" ({seed}both lanes have {'given' if greedy else 'drawn'} the same tokens so far)"
