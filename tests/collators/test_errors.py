"""Bad options and bad input get a CollatorError (a ValueError) that says what and where."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

import accmt_collators
from accmt_collators import (
    CollatorError,
    DataCollatorForLanguageModeling,
    DataCollatorForPermutationLanguageModeling,
    DataCollatorForSeq2Seq,
    DataCollatorForTokenClassification,
    DataCollatorForWholeWordMask,
    DataCollatorWithPadding,
)

from ._text import TinyTokenizer, wordpiece


def no_pad() -> TinyTokenizer:
    tokenizer = TinyTokenizer()
    tokenizer.pad_token_id = None
    return tokenizer


def test_errors_are_value_errors() -> None:
    assert issubclass(CollatorError, ValueError)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: DataCollatorWithPadding(no_pad()), r"no pad token .*tokenizer.pad_token = "),
        (lambda: DataCollatorWithPadding(TinyTokenizer(), padding="both"), "padding must be"),
        (lambda: DataCollatorWithPadding(TinyTokenizer(), max_length=0), "max_length must be"),
        (
            lambda: DataCollatorWithPadding(TinyTokenizer(), padding="max_length"),
            "padding='max_length' needs max_length",
        ),
        (
            lambda: DataCollatorWithPadding(TinyTokenizer(), pad_to_multiple_of=-8),
            "pad_to_multiple_of must be",
        ),
        (
            lambda: DataCollatorWithPadding(TinyTokenizer(), return_tensors="tf"),
            r"return_tensors must be 'pt' \(torch tensors\) or 'np' \(numpy arrays\), got 'tf'",
        ),
        (
            lambda: DataCollatorForLanguageModeling(TinyTokenizer(), mlm_probability=1.5),
            r"mlm_probability must be in \[0, 1\]",
        ),
        (
            lambda: DataCollatorForLanguageModeling(
                TinyTokenizer(), mask_replace_prob=0.8, random_replace_prob=0.3
            ),
            "must not exceed 1",
        ),
        (
            lambda: DataCollatorForLanguageModeling(
                TinyTokenizer(), mlm=False, whole_word_mask=True
            ),
            "whole_word_mask=True needs mlm=True",
        ),
        (lambda: DataCollatorForWholeWordMask(TinyTokenizer(), mlm=False), "mlm must be True"),
        (lambda: DataCollatorForLanguageModeling(TinyTokenizer(), seed="7"), "seed must be"),
        (
            lambda: DataCollatorForPermutationLanguageModeling(TinyTokenizer(), plm_probability=0),
            r"plm_probability must be in \(0, 1\]",
        ),
        (
            lambda: DataCollatorForPermutationLanguageModeling(TinyTokenizer(), max_span_length=0),
            "max_span_length must be",
        ),
    ],
)
def test_bad_options_are_named_when_the_collator_is_built(build: Any, message: str) -> None:
    with pytest.raises(CollatorError, match=message):
        build()


def test_a_masking_tokenizer_without_a_mask_token_says_how_to_add_one() -> None:
    tokenizer = TinyTokenizer()
    tokenizer.mask_token_id = None
    with pytest.raises(CollatorError, match=r"add_special_tokens\(\{'mask_token'.*mlm=False"):
        DataCollatorForLanguageModeling(tokenizer)
    DataCollatorForLanguageModeling(tokenizer, mlm=False)  # causal LM needs none


def test_a_missing_pad_token_is_an_error_only_when_padding_is_needed() -> None:
    collate = DataCollatorForLanguageModeling(no_pad(), mlm=False)
    assert collate([[2, 5, 3], [2, 6, 3]])["input_ids"].shape == (2, 3)
    with pytest.raises(CollatorError, match="no pad token"):
        collate([[2, 5, 3], [2, 3]])


def test_sequences_longer_than_max_length_are_named() -> None:
    collate = DataCollatorWithPadding(TinyTokenizer(), padding="max_length", max_length=3)
    with pytest.raises(
        CollatorError,
        match=r"samples\[1\]\['input_ids'\] has 4 tokens, more than max_length=3; truncate",
    ):
        collate([{"input_ids": [1, 2]}, {"input_ids": [1, 2, 3, 4]}])


def test_labels_longer_than_max_length_are_named() -> None:
    tagged = DataCollatorForTokenClassification(TinyTokenizer(), padding="max_length", max_length=4)
    with pytest.raises(CollatorError, match=r"samples\[0\]\['labels'\] has 5 labels, more than"):
        tagged([{"input_ids": [1, 2], "labels": [0, 0, 0, 0, 0]}])
    seq2seq = DataCollatorForSeq2Seq(TinyTokenizer(), padding="max_length", max_length=4)
    with pytest.raises(
        CollatorError,
        match=r"samples\[1\]\['labels'\] has 6 labels, more than max_length=4",
    ):
        seq2seq([{"input_ids": [1], "labels": [1]}, {"input_ids": [1], "labels": [1] * 6}])


def test_unpadded_ragged_samples_are_named() -> None:
    collate = DataCollatorWithPadding(TinyTokenizer(), padding=False)
    with pytest.raises(
        CollatorError, match=r"padding=False, but .* different lengths \(\[2, 3\]\)"
    ):
        collate([{"input_ids": [1, 2]}, {"input_ids": [1, 2, 3]}])


def test_fields_that_must_follow_the_tokens_are_checked() -> None:
    collate = DataCollatorWithPadding(TinyTokenizer())
    with pytest.raises(CollatorError, match=r"samples\[1\]\['attention_mask'\] has 2 entries"):
        collate(
            [
                {"input_ids": [1, 2], "attention_mask": [1, 1]},
                {"input_ids": [1, 2, 3], "attention_mask": [1, 1]},
            ]
        )
    with pytest.raises(CollatorError, match=r"samples\[1\] lacks \['label'\]"):
        collate([{"input_ids": [1], "label": 0}, {"input_ids": [1]}])
    with pytest.raises(CollatorError, match=r"samples\[\*\]\['input_ids'\] cannot be read"):
        collate([{"input_ids": ["a", "b"]}])


def test_whole_word_masking_without_word_boundaries_says_how_to_get_them() -> None:
    collate = DataCollatorForWholeWordMask(TinyTokenizer(), seed=0)
    with pytest.raises(CollatorError, match="return_offsets_mapping=True"):
        collate([{"input_ids": [2, 7, 3]}])


def test_masking_collators_need_input_ids() -> None:
    collate = DataCollatorForLanguageModeling(wordpiece(), seed=0)
    with pytest.raises(CollatorError, match=r"no tokenized mapping .* keys \['text'\]"):
        collate([{"text": "no ids here"}])


def test_importing_the_package_loads_no_transformers() -> None:
    probe = (
        "import sys, accmt_collators; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'transformers', 'tokenizers'}))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
    # Sorted as ruff's RUF022 sorts (isort's style): constants, then classes, then functions.
    names = accmt_collators.__all__
    assert names == sorted(names, key=lambda n: (not n.isupper(), not n[0].isupper(), n))
