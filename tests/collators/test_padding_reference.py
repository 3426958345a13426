"""The padding collators give transformers' tensors exactly, over randomised batches."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import transformers
from hypothesis import given, settings
from hypothesis import strategies as st

import accmt_collators

from ._text import as_kind, same_batch, token_rows, wordpiece

TOKENIZERS = {side: wordpiece(side) for side in ("left", "right")}
SIDES = st.sampled_from(["left", "right"])
KINDS = st.sampled_from(["list", "tensor", "numpy"])
MULTIPLES = st.none() | st.integers(1, 8)


@st.composite
def padding_options(draw: st.DrawFn, longest: int) -> dict[str, Any]:
    """padding, max_length and pad_to_multiple_of, such that the batch fits."""
    padding = draw(st.sampled_from([True, "longest", "max_length", False, "do_not_pad"]))
    options: dict[str, Any] = {"padding": padding, "pad_to_multiple_of": draw(MULTIPLES)}
    if padding == "max_length":
        options["max_length"] = draw(st.integers(longest, longest + 10))
    return options


@st.composite
def encodings(draw: st.DrawFn) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Tokenized samples with some of the optional keys, and padding options that fit them."""
    count = draw(st.integers(1, 6))
    options = draw(padding_options(longest=32))
    equal = options["padding"] in (False, "do_not_pad")
    rows = draw(token_rows(count, equal=equal))
    kind = draw(KINDS)
    extras = draw(st.sets(st.sampled_from(["attention_mask", "token_type_ids", "label"])))
    samples = []
    for index, row in enumerate(rows):
        sample: dict[str, Any] = {"input_ids": as_kind(row, kind)}
        if "attention_mask" in extras:
            sample["attention_mask"] = as_kind([1] * len(row), kind)
        if "token_type_ids" in extras:
            sample["token_type_ids"] = as_kind([index % 2] * len(row), kind)
        if "label" in extras:
            sample["label"] = draw(st.integers(0, 3) | st.floats(-2, 2, width=32))
        samples.append(sample)
    return samples, options


def both(name: str, side: str, **options: Any) -> tuple[Any, Any]:
    tokenizer = TOKENIZERS[side]
    ours = getattr(accmt_collators, name)(tokenizer, **options)
    return ours, getattr(transformers, name)(tokenizer, **options)


def copies(samples: list[dict[str, Any]]) -> list[dict[str, Any]]:
    # transformers' collators may change the samples they are given; each gets its own.
    return [dict(sample) for sample in samples]


@settings(settings.get_profile("collators"))
@given(encodings(), SIDES)
def test_with_padding_matches_transformers(
    batch: tuple[list[dict[str, Any]], dict[str, Any]], side: str
) -> None:
    samples, options = batch
    if any(isinstance(s.get("label"), float) for s in samples) and any(
        isinstance(s.get("label"), int) for s in samples
    ):
        samples = [{**s, "label": float(s["label"])} for s in samples]
    ours, theirs = both("DataCollatorWithPadding", side, **options)
    same_batch(ours(copies(samples)), theirs(copies(samples)))


@st.composite
def tagged(draw: st.DrawFn) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Samples with one label per token (as lists or tensors), and fitting options."""
    samples, options = draw(encodings())
    kind = draw(KINDS)
    for sample in samples:
        sample.pop("label", None)
        count = len(sample["input_ids"])
        tags = draw(st.lists(st.integers(-100, 8), min_size=count, max_size=count))
        sample["labels"] = as_kind(tags, kind)
    return samples, options


@settings(settings.get_profile("collators"))
@given(tagged(), SIDES, st.sampled_from([-100, -1, 7]))
def test_token_classification_matches_transformers(
    batch: tuple[list[dict[str, Any]], dict[str, Any]], side: str, label_pad: int
) -> None:
    samples, options = batch
    name = "DataCollatorForTokenClassification"
    ours, theirs = both(name, side, label_pad_token_id=label_pad, **options)
    same_batch(ours(copies(samples)), theirs(copies(samples)))


class ShiftingModel:
    """Stands in for an encoder-decoder model: decoder inputs are the labels shifted right."""

    def prepare_decoder_input_ids_from_labels(self, labels: torch.Tensor) -> torch.Tensor:
        shifted = torch.full_like(labels, 2)
        shifted[:, 1:] = labels[:, :-1].clamp(min=0)
        return shifted


@st.composite
def translations(draw: st.DrawFn) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Samples with target labels of their own lengths, and options that fit them."""
    samples, options = draw(encodings())
    kind = draw(KINDS)
    equal = options["padding"] in (False, "do_not_pad")
    targets = draw(token_rows(len(samples), equal=equal))
    if "max_length" in options:
        options["max_length"] = max(options["max_length"], *map(len, targets))
    for sample, target in zip(samples, targets, strict=True):
        sample.pop("label", None)
        sample["labels"] = as_kind(target, kind)
    return samples, options


# transformers' own slow path for numpy labels, not ours.
@pytest.mark.filterwarnings("ignore:Creating a tensor from a list of numpy")
@settings(settings.get_profile("collators"))
@given(translations(), SIDES, st.booleans())
def test_seq2seq_matches_transformers(
    batch: tuple[list[dict[str, Any]], dict[str, Any]], side: str, with_model: bool
) -> None:
    samples, options = batch
    model = ShiftingModel() if with_model else None
    ours, theirs = both("DataCollatorForSeq2Seq", side, model=model, **options)
    got, expected = ours(copies(samples)), theirs(copies(samples))
    same_batch(got, expected)
    assert ("decoder_input_ids" in got) == with_model


def test_seq2seq_without_labels_gives_labels_none_as_transformers() -> None:
    samples = [{"input_ids": [2, 9, 3]}, {"input_ids": [2, 3]}]
    ours, theirs = both("DataCollatorForSeq2Seq", "right", model=ShiftingModel())
    same_batch(ours(copies(samples)), theirs(copies(samples)))


@settings(settings.get_profile("collators"))
@given(st.integers(1, 6).flatmap(token_rows), SIDES, MULTIPLES, KINDS, st.booleans())
def test_causal_language_modeling_matches_transformers(
    rows: list[list[int]], side: str, multiple: int | None, kind: str, bare: bool
) -> None:
    samples = [as_kind(row, kind) if bare else {"input_ids": as_kind(row, kind)} for row in rows]
    tokenizer = TOKENIZERS[side]
    ours = accmt_collators.DataCollatorForLanguageModeling(
        tokenizer, mlm=False, pad_to_multiple_of=multiple
    )
    theirs = transformers.DataCollatorForLanguageModeling(
        tokenizer, mlm=False, pad_to_multiple_of=multiple
    )
    expected = theirs(samples if bare else copies(samples))
    # transformers stacks equal-length bare tensors as they are; it makes int64 of the rest.
    expected = {key: value.to(torch.int64) for key, value in expected.items()}
    same_batch(ours(samples if bare else copies(samples)), expected)


@pytest.mark.parametrize("side", ["left", "right"])
def test_real_encodings_pad_as_transformers(side: str) -> None:
    from ._text import TEXTS, encoded

    tokenizer = TOKENIZERS[side]
    texts = [text[: 100 + 40 * i] for i, text in enumerate(TEXTS[:6])]
    pairs = encoded(texts, tokenizer, text_pair=TEXTS[6][:200], truncation=True, max_length=60)
    for sample in pairs:
        sample["special_tokens_mask"] = tokenizer.get_special_tokens_mask(
            sample["input_ids"], already_has_special_tokens=True
        )
    ours, theirs = both("DataCollatorWithPadding", side, pad_to_multiple_of=16)
    same_batch(ours(copies(pairs)), theirs(copies(pairs)))
