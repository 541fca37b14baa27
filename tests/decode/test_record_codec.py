"""Step records to JSON values and back: exactly the same records, and a record edited out of shape refused."""

import json

import pytest
import torch
from viz_records import generation, ngram_record, sampled_record, with_verdicts

from bita.decode.record_codec import attention_from_json, attention_json, step_from_json, step_json
from bita.decode.sampling import Sampling


def through_json(record):
    return step_from_json(json.loads(json.dumps(step_json(record))))


def same(a, b) -> bool:
    """Equal records, their attention masks compared as tensors."""
    masks = (a.attention, b.attention)
    if (masks[0] is None) != (masks[1] is None) or (masks[0] is not None and not torch.equal(*masks)):
        return False
    return {**vars(a), "attention": None} == {**vars(b), "attention": None}


def test_every_record_comes_back_exactly_drafts_masks_verdicts_and_sampled_warps():
    noise = torch.tensor([1.0, 1.0, 1.0, 0.5, 1.0, 1.0, 1.0, 1.0, 2.0, 1.0])
    records = [*generation(), ngram_record(), with_verdicts(),
               sampled_record(3, [8], [], noise, Sampling(temperature=0.7, top_k=3, seed=0))]
    for record in records:
        back = through_json(record)
        assert same(back, record), record.index
    assert through_json(records[-1]).verdicts[0].warp.kept == 3


@pytest.mark.parametrize("shape", [(1, 1), (3, 7), (9, 16), (65, 381)])
def test_attention_bits_pack_any_shape(shape):
    mask = torch.rand(shape, generator=torch.Generator().manual_seed(0)) < 0.5
    assert torch.equal(attention_from_json(attention_json(mask)), mask)


@pytest.mark.parametrize("edit,message", [
    (lambda d: d.update(kind="beam"), "kind 'beam'"),
    (lambda d: d.update(emitted=[99, 98]), "emitted tokens are not"),
    (lambda d: d.update(accepted=[17]), "accepted tokens are not"),
    (lambda d: d["nodes"][0].update(parent=5), "parent or status"),
    (lambda d: d.update(root="the"), "its field 'root'"),
    (lambda d: d["verdicts"][0]["chosen"].update(token=3), "verdicts are not of its emitted"),
    (lambda d: d.update(rows=2), "attention mask is not one of its 2 rows"),
    (lambda d: d["attention"].update(bits="AAAA"), "bytes, not the"),
])
def test_a_record_edited_out_of_shape_is_refused_with_what_is_wrong(edit, message):
    found = json.loads(json.dumps(step_json(with_verdicts())))
    edit(found)
    with pytest.raises(ValueError, match=message):
        step_from_json(found)


def test_a_missing_field_is_a_key_error():
    found = step_json(generation()[1])
    del found["nodes"]
    with pytest.raises(KeyError, match="nodes"):
        step_from_json(found)
