"""DataCollatorWithFlattening: transformers' flattened batches, rows of ``max_length`` laid
best-fit decreasing, and documents that stay exact in a transformers model.

The tests marked ``transformers`` compare with transformers' own collator, and run GPT-2 and
Llama (built from tiny configs, nothing downloaded) on the collator's batch: each document's
summed token loss must equal that document run alone; without the batch's ``use_cache=False``
(the models' default builds a KV cache, also in training) it must not.
"""

from __future__ import annotations

import functools
import warnings
from typing import Any

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from accmt_collators import DOCUMENT_SPANS, CollatorError, DataCollatorWithFlattening, pack_stream

LENGTHS = (7, 3, 12, 5, 9, 16, 2)
VOCAB = 64


def documents(lengths: tuple[int, ...] = LENGTHS, *, seed: int = 0) -> list[dict[str, Any]]:
    """Samples of random tokens of ``lengths``, each carrying its dataset ``index``."""
    generator = torch.Generator().manual_seed(seed)
    return [
        {"input_ids": torch.randint(1, VOCAB, (n,), generator=generator).tolist(), "index": 10 + i}
        for i, n in enumerate(lengths)
    ]


def unpacked(batch: dict[str, Any]) -> dict[int, list[int]]:
    """Each document's tokens read back from the batch through ``document_spans``."""
    return {
        int(index): batch["input_ids"][row, start : start + length].tolist()
        for index, row, start, length in batch["document_spans"].tolist()
    }


# Against transformers' collator


# Each option set once, each kind of sample and each return_tensors at least once.
CASES = [
    ({}, "list", "pt"),
    ({"return_flash_attn_kwargs": True, "return_seq_idx": True}, "tensor", "np"),
    ({"return_position_ids": False, "separator_id": -1}, "labels", "pt"),
    ({"position_ids_start": 2, "return_seq_idx": True}, "labels", "np"),
]


@pytest.mark.transformers
@pytest.mark.parametrize(("options", "kind", "return_tensors"), CASES)
def test_equals_transformers(options: dict[str, Any], kind: str, return_tensors: str) -> None:
    transformers = pytest.importorskip("transformers")
    samples: list[dict[str, Any]] = []
    for sample in documents():
        ids = sample["input_ids"]
        if kind == "tensor":
            samples.append({"input_ids": torch.tensor(ids)})
        elif kind == "labels":
            samples.append({"input_ids": ids, "labels": [(t * 7) % VOCAB for t in ids]})
        else:
            samples.append({"input_ids": ids, "attention_mask": [1] * len(ids)})
    theirs = transformers.DataCollatorWithFlattening(return_tensors=return_tensors, **options)(
        [dict(sample) for sample in samples]
    )
    ours = DataCollatorWithFlattening(return_tensors=return_tensors, **options)(samples)
    assert ours.pop("use_cache") is False
    assert list(ours) == list(theirs)
    for key, value in theirs.items():
        assert type(ours[key]) is type(value), key
        if isinstance(value, int):
            assert ours[key] == value, key
        else:
            assert ours[key].dtype == value.dtype, key
            assert ours[key].shape == value.shape, key
            assert (ours[key] == value).all(), key


# Exact documents in transformers models


@functools.cache
def tiny_model(architecture: str, attention: str) -> Any:
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    ids = {"bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0}
    if architecture == "gpt2":
        config = transformers.GPT2Config(
            n_layer=2,
            n_head=4,
            n_embd=32,
            vocab_size=VOCAB,
            n_positions=64,
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            attn_pdrop=0.0,
            **ids,
        )
        model = transformers.GPT2LMHeadModel._from_config(config, attn_implementation=attention)
    else:
        config = transformers.LlamaConfig(
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            hidden_size=32,
            intermediate_size=64,
            vocab_size=VOCAB,
            max_position_embeddings=64,
            **ids,
        )
        model = transformers.LlamaForCausalLM._from_config(config, attn_implementation=attention)
    assert model.config.use_cache is True  # the default that sets the trap
    return model.float()


def document_losses(model: Any, batch: dict[str, Any]) -> dict[int, torch.Tensor]:
    """Each document's summed token loss in the packed forward: cross-entropy of the shifted
    logits against the batch's labels over that document's tokens, by dataset index."""
    batch = dict(batch)
    labels = batch.pop("labels")
    spans = batch.pop("document_spans")
    with torch.no_grad():
        logits = model(**batch).logits
    per_token = torch.nn.functional.cross_entropy(
        logits[:, :-1].transpose(1, 2), labels[:, 1:], reduction="none"
    )
    return {
        int(index): per_token[row, start : start + length - 1].sum()
        for index, row, start, length in spans.tolist()
    }


def alone_loss(model: Any, tokens: list[int]) -> torch.Tensor:
    ids = torch.tensor([tokens])
    with torch.no_grad():
        logits = model(input_ids=ids).logits
    return torch.nn.functional.cross_entropy(logits[0, :-1], ids[0, 1:], reduction="sum")


def set_mode(model: Any, mode: str) -> Any:
    return model.train() if mode == "train" else model.eval()


def batches(samples: list[dict[str, Any]], **options: Any) -> dict[str, dict[str, Any]]:
    """The collator's batches of ``samples``: one row, rows of 16, and the rows of 16 that
    ``pack_stream`` packs, laid out as given."""
    rows = list(pack_stream(samples, 16, window=4))
    return {
        "one row": DataCollatorWithFlattening(**options)(samples),
        "max_length=16": DataCollatorWithFlattening(max_length=16, **options)(samples),
        "pack_stream": DataCollatorWithFlattening(max_length=16, **options)(rows),
    }


@pytest.mark.transformers
@pytest.mark.parametrize(
    ("architecture", "attention"),
    [("gpt2", "sdpa"), ("gpt2", "eager"), ("llama", "sdpa"), ("llama", "eager")],
)
def test_each_document_equals_it_alone(architecture: str, attention: str) -> None:
    # One model per family and attention; train and eval mode, each layout of the batch.
    samples = documents()
    laid_out = batches(samples)
    assert laid_out["one row"]["input_ids"].shape == (1, sum(LENGTHS))
    assert laid_out["max_length=16"]["input_ids"].shape == (4, 16)
    for mode in ("train", "eval"):
        model = set_mode(tiny_model(architecture, attention), mode)
        alone = {sample["index"]: alone_loss(model, sample["input_ids"]) for sample in samples}
        assert min(alone.values()) > 0
        for layout, batch in laid_out.items():
            assert batch["use_cache"] is False
            packed = document_losses(model, batch)
            assert sorted(packed) == sorted(alone), layout
            for index, loss in alone.items():
                torch.testing.assert_close(
                    packed[index], loss, rtol=1e-5, atol=0, msg=f"{mode}, {layout}, {index}"
                )


@pytest.mark.transformers
@pytest.mark.parametrize("architecture", ["gpt2", "llama"])
def test_without_use_cache_false_documents_see_each_other(architecture: str) -> None:
    samples = documents()
    for mode in ("train", "eval"):
        model = set_mode(tiny_model(architecture, "sdpa"), mode)
        alone = {sample["index"]: alone_loss(model, sample["input_ids"]) for sample in samples}
        for layout, batch in batches(samples, use_cache=None).items():
            assert "use_cache" not in batch
            packed = document_losses(model, batch)
            gaps = [float((packed[i] - loss).abs() / loss) for i, loss in alone.items()]
            # A row's first document has nothing before it; every later one attends across.
            assert max(gaps) > 1e-3, (mode, layout, gaps)


# Rows of max_length


def test_best_fit_decreasing_places_a_hand_example() -> None:
    # Longest first: 12 opens row 0 (room 4), 9 opens row 1 (room 7), 7 fills row 1, 5 fits
    # nowhere and opens row 2 (room 11), 3 goes where it leaves least room: row 0 (room 4).
    samples = documents((7, 3, 12, 5, 9))
    batch = DataCollatorWithFlattening(max_length=16, return_seq_idx=True)(samples)
    assert batch["document_spans"].tolist() == [
        [10, 1, 0, 7],
        [11, 0, 0, 3],
        [12, 0, 3, 12],
        [13, 2, 0, 5],
        [14, 1, 7, 9],
    ]
    assert batch["input_ids"].shape == (3, 16)
    assert batch["position_ids"].tolist() == [
        [0, 1, 2, *range(12), 0],
        [*range(7), *range(9)],
        [*range(5), *range(11)],
    ]
    assert batch["seq_idx"].tolist() == [
        [0] * 3 + [1] * 12 + [2],
        [0] * 7 + [1] * 9,
        [0] * 5 + [1] * 11,
    ]
    # Padding is a document of its own: token 0, positions from 0, labels -100.
    assert batch["input_ids"][2, 5:].tolist() == [0] * 11
    assert batch["labels"][2, 5:].tolist() == [-100] * 11
    assert batch["labels"][0, 15].item() == -100


def test_best_fit_is_not_first_fit() -> None:
    # 12 opens row 0 (room 8), 10 opens row 1 (room 10), 9 fits only row 1 (room 1); 1 then
    # goes to row 1, which it fills, where first fit would put it in row 0.
    batch = DataCollatorWithFlattening(max_length=20)(documents((1, 10, 12, 9)))
    assert batch["document_spans"].tolist() == [
        [10, 1, 0, 1],
        [11, 1, 1, 10],
        [12, 0, 0, 12],
        [13, 1, 11, 9],
    ]
    assert batch["labels"][0, 12:].tolist() == [-100] * 8


@given(
    lengths=st.lists(st.integers(1, 40), min_size=1, max_size=12),
    width=st.integers(1, 32),
)
def test_every_token_once_in_rows_of_max_length(lengths: list[int], width: int) -> None:
    samples = documents(tuple(lengths))
    collator = DataCollatorWithFlattening(max_length=width, return_flash_attn_kwargs=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        batch = collator(samples)
    cut = [n - width for n in lengths if n > width]
    assert len(caught) == (1 if cut else 0)
    if cut:
        assert f"{sum(cut)} token(s) dropped" in str(caught[0].message)
    assert batch["input_ids"].shape[1] == width
    assert unpacked(batch) == {s["index"]: s["input_ids"][:width] for s in samples}
    # No two documents share a token, and every other token is padding.
    taken = torch.zeros(batch["input_ids"].shape, dtype=torch.long)
    for _, row, start, length in batch["document_spans"].tolist():
        taken[row, start : start + length] += 1
        assert batch["labels"][row, start].item() == -100
        assert batch["position_ids"][row, start : start + length].tolist() == list(range(length))
    assert taken.max() <= 1
    assert (batch["labels"][taken == 0] == -100).all()
    assert (batch["input_ids"][taken == 0] == 0).all()
    used = sum(min(n, width) for n in lengths)
    assert int(taken.sum()) == used
    # Best fit opens a row only for a document no open row can take: at most one row is half
    # empty or more.
    assert batch["input_ids"].shape[0] <= 2 * -(-used // width)
    assert int(batch["cu_seq_lens_q"][-1]) == batch["input_ids"].numel()


def test_without_index_no_document_spans() -> None:
    batch = DataCollatorWithFlattening()([{"input_ids": [1, 2, 3]}, {"input_ids": [4, 5]}])
    assert "document_spans" not in batch
    assert batch["input_ids"].tolist() == [[1, 2, 3, 4, 5]]
    assert batch["labels"].tolist() == [[-100, 2, 3, -100, 5]]


def test_labels_and_tensors_are_cut_with_their_tokens() -> None:
    samples = [
        {
            "input_ids": torch.tensor([5, 6, 7, 8, 9, 10]),
            "labels": torch.tensor([1, 2, 3, 4, 5, 6]),
        },
        {"input_ids": torch.tensor([11, 12]), "labels": torch.tensor([7, 8])},
    ]
    with pytest.warns(
        UserWarning, match=r"1 sequence\(s\) .* 2 token\(s\) dropped \(samples\[0\] lost 2\)"
    ):
        batch = DataCollatorWithFlattening(max_length=4, use_cache=None)(samples)
    assert batch["input_ids"].tolist() == [[5, 6, 7, 8], [11, 12, 0, 0]]
    assert batch["labels"].tolist() == [[-100, 2, 3, 4], [-100, 8, -100, -100]]
    assert batch["position_ids"].tolist() == [[0, 1, 2, 3], [0, 1, 0, 1]]
    assert sorted(batch) == ["input_ids", "labels", "position_ids"]


# Packed rows given as samples


def test_given_rows_are_laid_out_as_they_are() -> None:
    rows = [
        [{"input_ids": [5, 6], "index": 3}, {"input_ids": [7, 8, 9], "index": 1}],
        [{"input_ids": [4], "index": 2}],
    ]
    batch = DataCollatorWithFlattening()(rows)  # no max_length: padded to the fullest row
    assert batch["input_ids"].tolist() == [[5, 6, 7, 8, 9], [4, 0, 0, 0, 0]]
    assert batch["position_ids"].tolist() == [[0, 1, 0, 1, 2], [0, 0, 1, 2, 3]]
    assert batch["labels"].tolist() == [[-100, 6, -100, 8, 9], [-100, -100, -100, -100, -100]]
    assert batch[DOCUMENT_SPANS].tolist() == [[3, 0, 0, 2], [1, 0, 2, 3], [2, 1, 0, 1]]
    assert batch["use_cache"] is False
    wide = DataCollatorWithFlattening(max_length=8, return_flash_attn_kwargs=True)(rows)
    assert wide["input_ids"].shape == (2, 8)
    assert wide["cu_seq_lens_q"].tolist() == [0, 2, 5, 8, 9, 16]
    with pytest.raises(
        CollatorError, match=r"samples\[0\] is a packed row of 5 tokens, more than max_length=4"
    ):
        DataCollatorWithFlattening(max_length=4)(rows)


def test_flattens_sequences_is_a_read_only_marker() -> None:
    collator = DataCollatorWithFlattening()
    assert DataCollatorWithFlattening.flattens_sequences is True
    assert getattr(collator, "flattens_sequences", False) is True
    with pytest.raises(AttributeError, match="flattens_sequences is read-only"):
        collator.flattens_sequences = False  # type: ignore[misc]
    assert DOCUMENT_SPANS == "document_spans"


# Errors named


@pytest.mark.parametrize(
    ("samples", "message"),
    [
        ([{"input_ids": [1, 2]}, {"labels": [1]}], r"samples\[1\] has no 'input_ids'"),
        ([{"input_ids": [1, 2]}, {"input_ids": []}], r"samples\[1\]\['input_ids'\] is empty"),
        (
            [{"input_ids": torch.tensor([], dtype=torch.long)}],
            r"samples\[0\]\['input_ids'\] is empty",
        ),
        ([[1, 2, 3]], r"samples\[0\]\[0\] is a int, not a mapping"),
        ([7], r"samples\[0\] is a int, not a mapping"),
        (
            [[{"input_ids": [1]}], {"input_ids": [1]}],
            r"samples\[0\] is a packed row .* samples\[1\] is one document",
        ),
        ([[{"input_ids": [1]}], []], r"samples\[1\] is an empty packed row"),
        (
            [[{"input_ids": [1]}, {"input_ids": [2], "index": 1}]],
            r"samples\[0\]\[0\] has no 'index'",
        ),
        ([{"input_ids": [1.5, 2.0]}], r"samples\[0\]\['input_ids'\] must be a list of ints"),
        ([{"input_ids": [[1, 2]]}], r"samples\[0\]\['input_ids'\] must be a list of ints"),
        ([{"input_ids": [1, 2], "labels": [1]}], r"samples\[0\]\['labels'\] has 1 values for 2"),
        (
            [{"input_ids": [1, 2]}, {"input_ids": [1, 2], "labels": [1, 2]}],
            r"samples\[1\] has 'labels' and samples\[0\] has none",
        ),
        (
            [{"input_ids": [1, 2], "index": 3}, {"input_ids": [1, 2]}],
            r"samples\[1\] has no 'index'",
        ),
        ([{"input_ids": [1, 2], "index": "a"}], r"samples\[0\]\['index'\] must be an int"),
        ([], "the batch has no samples"),
    ],
)
def test_bad_samples_are_named(samples: list[Any], message: str) -> None:
    with pytest.raises(CollatorError, match=message):
        DataCollatorWithFlattening()(samples)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_length": 0}, "max_length must be None or an int >= 1"),
        ({"max_length": 2.5}, "max_length must be None or an int >= 1"),
        ({"use_cache": True}, "use_cache must be False"),
        ({"max_length": 8, "return_position_ids": False}, "max_length needs return_position_ids"),
        ({"separator_id": None}, "separator_id must be an int"),
        ({"return_tensors": "tf"}, "return_tensors must be 'pt'"),
    ],
)
def test_bad_options_are_named(options: dict[str, Any], message: str) -> None:
    with pytest.raises(CollatorError, match=f"DataCollatorWithFlattening: {message}"):
        DataCollatorWithFlattening(**options)
