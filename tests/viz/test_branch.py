"""A what-if branch beside its original, and the tokens a clicked token offers to force."""

import html

from viz_records import decode, generation, with_verdicts

from viz.branch import branch_html, force_choices


def test_the_original_and_the_branch_side_by_side_from_the_forced_position():
    answer = [6, 7, 8, 9, 2]  # ' mat . \n <script> cat'
    page = branch_html(answer, 2, 12, generation()[1:2], decode, "branch")
    original, branch = page.split("<b>what if: token 3 forced</b>")
    assert "…" + html.escape(" mat.") in original and ">\n</span>" in original  # the original's token, outlined
    assert html.escape("<script> cat") in original
    assert "> hat</span>" in branch and 'class="bita-tok bita-turn-branch bita-pass-1 bita-slot-0"' in branch


def test_a_clicked_token_offers_its_rows_other_tokens_at_its_place_in_the_answer():
    record = with_verdicts()  # token 2's row: '\n' chosen over ' hat', turned down ' dog'
    assert force_choices(record, 1, offset=5, decode=decode) == [("' hat' 38 % (token 7)", "6:12"),
                                                                  ("' dog' 5.0 % (token 7)", "6:10")]
    assert force_choices(generation()[1], 0, 5, decode) == []  # no verdicts, nothing to offer
