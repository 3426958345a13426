"""accmt 1.x's nested samples: tokenized mappings inside dicts, tuples and lists, each padded
on its own; everything else collated by torch's default_collate."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import pytest
import torch
from torch.utils.data import default_collate

import accmt_collators
from accmt_collators import CollatorError, DataCollatorForSeq2Seq, DataCollatorWithPadding

from ._kinds import TOKENIZER_COLLATORS, TOKENIZER_FREE_COLLATORS
from ._text import TinyTokenizer, same_batch

SOURCE = [{"input_ids": [2, 7, 8, 3]}, {"input_ids": [2, 9, 3]}]
TARGET = [{"input_ids": [2, 5, 3]}, {"input_ids": [2, 6, 6, 6, 6, 3]}]
PAD = DataCollatorWithPadding(TinyTokenizer())


def test_a_tuple_of_encodings_and_a_label_pads_each_encoding_on_its_own() -> None:
    samples = [(SOURCE[i], TARGET[i], i) for i in range(2)]
    source, target, labels = PAD(samples)
    same_batch(source, PAD(SOURCE))
    same_batch(target, PAD(TARGET))
    assert source["input_ids"].shape == (2, 4)
    assert target["input_ids"].shape == (2, 6)
    assert torch.equal(labels, torch.tensor([0, 1]))


def test_dicts_and_lists_nest_to_any_depth() -> None:
    samples = [
        {
            "pair": [SOURCE[i], {"inner": TARGET[i]}],
            "meta": {"id": i, "weight": 0.5 * i},
            "tags": [1, 2, 3],
            "name": f"s{i}",
            "image": torch.full((2, 2), float(i)),
        }
        for i in range(2)
    ]
    batch = PAD(samples)
    same_batch(batch["pair"][0], PAD(SOURCE))
    same_batch(batch["pair"][1]["inner"], PAD(TARGET))
    assert isinstance(batch["pair"], list)
    for key in ("meta", "tags", "name", "image"):
        expected = default_collate([sample[key] for sample in samples])
        assert str(batch[key]) == str(expected), key


class Pair(NamedTuple):
    source: dict[str, Any]
    target: dict[str, Any]


def test_namedtuples_keep_their_type() -> None:
    batch = PAD([Pair(SOURCE[i], TARGET[i]) for i in range(2)])
    assert isinstance(batch, Pair)
    same_batch(batch.target, PAD(TARGET))


def test_np_batches_turn_every_tensor_at_any_depth_into_an_array() -> None:
    samples = [
        (Pair(SOURCE[i], TARGET[i]), {"tags": [i, 2], "name": f"s{i}", "score": 0.5 * i})
        for i in range(2)
    ]
    tensors = PAD(samples)
    arrays = DataCollatorWithPadding(TinyTokenizer(), return_tensors="np")(samples)
    assert isinstance(arrays, tuple)
    assert isinstance(arrays[0], Pair)
    assert isinstance(arrays[1]["tags"], list)
    assert arrays[1]["name"] == ["s0", "s1"]
    pairs = [
        (arrays[0].source["input_ids"], tensors[0].source["input_ids"]),
        (arrays[0].target["attention_mask"], tensors[0].target["attention_mask"]),
        (arrays[1]["tags"][0], tensors[1]["tags"][0]),
        (arrays[1]["score"], tensors[1]["score"]),
    ]
    for array, tensor in pairs:
        assert isinstance(array, np.ndarray)
        assert array.dtype == tensor.numpy().dtype
        assert np.array_equal(array, tensor.numpy())


def extra_fields(name: str, index: int) -> dict[str, Any]:
    """What each collator reads besides input_ids: labels, or word offsets."""
    length = len(SOURCE[index]["input_ids"])
    if name == "DataCollatorForTokenClassification":
        return {"labels": [1] * length}
    if name == "DataCollatorForSeq2Seq":
        return {"labels": TARGET[index]["input_ids"]}
    if name == "DataCollatorForWholeWordMask":
        return {"offset_mapping": [(k, k + 1) for k in range(length)]}
    return {}


def test_every_collator_walks_nested_samples() -> None:
    options: dict[str, Any] = {
        "DataCollatorForLanguageModeling": {"seed": 0},
        "DataCollatorForWholeWordMask": {"seed": 0},
        "DataCollatorForPermutationLanguageModeling": {"seed": 0, "pad_to_multiple_of": 2},
    }
    # accmt 1.x's six: DataCollatorWithFlattening takes no tokenizer and no nested samples
    # (a sample is one document or one packed row; see _kinds).
    for name in TOKENIZER_COLLATORS:
        collate = getattr(accmt_collators, name)(TinyTokenizer(), **options.get(name, {}))
        encoding, label = collate([({**SOURCE[i], **extra_fields(name, i)}, i) for i in range(2)])
        assert encoding["input_ids"].shape == (2, 4), name
        assert torch.equal(label, torch.tensor([0, 1])), name


def test_every_collator_has_a_kind() -> None:
    names = sorted(name for name in accmt_collators.__all__ if name.startswith("DataCollator"))
    assert sorted(TOKENIZER_COLLATORS + TOKENIZER_FREE_COLLATORS) == names
    assert not set(TOKENIZER_COLLATORS) & set(TOKENIZER_FREE_COLLATORS)


def test_the_flattening_collator_refuses_a_nest_naming_it() -> None:
    collate = accmt_collators.DataCollatorWithFlattening()
    with pytest.raises(CollatorError, match=r"samples\[0\]\[1\] is a int, not a mapping"):
        collate([(SOURCE[0], 0), (SOURCE[1], 1)])


def test_seq2seq_pads_labels_inside_nested_samples() -> None:
    collate = DataCollatorForSeq2Seq(TinyTokenizer(), label_pad_token_id=-1)
    samples = [{"x": {**SOURCE[i], "labels": TARGET[i]["input_ids"]}} for i in range(2)]
    labels = collate(samples)["x"]["labels"]
    assert labels.tolist() == [[2, 5, 3, -1, -1, -1], [2, 6, 6, 6, 6, 3]]


@pytest.mark.parametrize(
    ("samples", "message"),
    [
        ([(SOURCE[0], 1), ({"ids": [1]}, 2)], r"samples\[1\]\[0\] has no 'input_ids'"),
        ([(SOURCE[0], [1, 2]), (SOURCE[1], [1])], r"samples\[1\]\[1\] has 1 items"),
        ([(SOURCE[0], torch.ones(2)), (SOURCE[1], torch.ones(3))], r"samples\[\*\]\[1\]"),
        ([{"a": SOURCE[0]}, {"b": SOURCE[1]}], r"samples\[1\] lacks the key 'a'"),
        ([{"a": SOURCE[0]}, (SOURCE[1],)], r"samples\[1\] is a tuple, but samples\[0\] is a map"),
        ([{"x": 1}, {"x": 2}], "no tokenized mapping"),
        ([], "empty batch"),
    ],
)
def test_bad_structures_are_named(samples: list[Any], message: str) -> None:
    with pytest.raises(CollatorError, match=message):
        PAD(samples)
