"""What the verifier said of a token, in words: for a chat token's hover, a struck draft's, and figure titles.

"the model gave ' in' 41 %, the runner-up ' on' 38 %: a near tie, rounding could swap them" (the rule of
bita/decode/explain.py: the two logits within rounding of the model's dtype); a struck draft: "the model
gave ' in' 41 %, the draft ' on' 38 %". Probabilities are those of the distribution the token was chosen
from (sampled: the warped one). Pure: a verdict and a token decoder in, plain text out (escape it for HTML).
"""

from __future__ import annotations

from bita.decode.explain import Alternative, RowVerdict

from .labels import Decode


def percent(prob: float) -> str:
    """'41 %', '4.2 %', '<0.1 %'."""
    if prob < 0.0005:
        return "<0.1 %"
    return f"{100 * prob:.0f} %" if prob >= 0.095 else f"{100 * prob:.1f} %"


def given(alternative: Alternative, decode: Decode) -> str:
    """"' in' 41 %": a token in quotes (repr: whitespace and newlines visible) and its probability."""
    return f"{decode([alternative.token])!r} {percent(alternative.prob)}"


def chosen_sentence(verdict: RowVerdict, decode: Decode) -> str:
    """The model's probability of the emitted token against the likeliest other ('the runner-up', or 'its
    favourite' where a sample drew a less likely token), and that it was a near tie where it was one."""
    other = "the runner-up" if verdict.logit_margin >= 0 else "its favourite"
    tie = ": a near tie, rounding could swap them" if verdict.near_tie else ""
    return f"the model gave {given(verdict.chosen, decode)}, {other} {given(verdict.runner_up, decode)}{tie}"


def rejected_sentence(verdict: RowVerdict, draft: Alternative, decode: Decode) -> str:
    """A turned-down draft against the token the model chose at its row."""
    return f"the model gave {given(verdict.chosen, decode)}, the draft {given(draft, decode)}"


def turned_down(verdict: RowVerdict, token: int) -> Alternative | None:
    """The draft ``token`` as the verifier's row saw it, None where this row did not check it."""
    return next((a for a in verdict.rejected if a.token == token), None)
