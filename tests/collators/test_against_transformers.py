"""accmt's collators beside transformers' for the options they share: ``padding=`` as
transformers' ``PaddingStrategy``, ``seed=`` and ``return_tensors="np"``.

Padding is deterministic, so padded batches must equal transformers' to the value and dtype.
Masking draws differ by design (ours are a function of seed, epoch and sample), so there the
shapes, dtypes, padding and -100 labels must agree, and the draws by their rates.
"""

from __future__ import annotations

import enum
import re
from typing import Any

import pytest
import transformers
from transformers.utils import PaddingStrategy

import accmt_collators
from accmt_collators import CollatorError

from ._text import TEXTS, encoded, same_batch, wordpiece

TOKENIZER = wordpiece()
PADDING_COLLATORS = [
    "DataCollatorWithPadding",
    "DataCollatorForTokenClassification",
    "DataCollatorForSeq2Seq",
]


def padding_samples(name: str, count: int = 6, *, equal: bool = False) -> list[dict[str, Any]]:
    """Encodings of real texts with the labels ``name`` takes (of one length when ``equal``)."""
    lengths = [24] * count if equal else [12 + 7 * i for i in range(count)]
    texts = [text[:400] for text in TEXTS[:count]]
    samples = [
        encoded([text], TOKENIZER, truncation=True, max_length=length)[0]
        for text, length in zip(texts, lengths, strict=True)
    ]
    for index, sample in enumerate(samples):
        if name == "DataCollatorWithPadding":
            sample["label"] = index % 3
        elif name == "DataCollatorForTokenClassification":
            sample["labels"] = [(index + place) % 5 for place in range(len(sample["input_ids"]))]
        else:  # targets of their own lengths
            sample["labels"] = sample["input_ids"][: 5 + (0 if equal else 3 * index)]
    return samples


def copies(samples: list[dict[str, Any]]) -> list[dict[str, Any]]:
    # transformers' collators may change the samples they are given; each gets its own.
    return [dict(sample) for sample in samples]


def padding_options(strategy: Any) -> dict[str, Any]:
    value = strategy.value if isinstance(strategy, enum.Enum) else strategy
    options: dict[str, Any] = {"padding": strategy, "pad_to_multiple_of": 8}
    if value == "max_length":
        options["max_length"] = 64
    return options


@pytest.mark.parametrize("name", PADDING_COLLATORS)
@pytest.mark.parametrize("strategy", list(PaddingStrategy))
def test_padding_strategy_pads_as_transformers(name: str, strategy: PaddingStrategy) -> None:
    samples = padding_samples(name, equal=strategy is PaddingStrategy.DO_NOT_PAD)
    options = padding_options(strategy)
    ours = getattr(accmt_collators, name)(TOKENIZER, **options)
    theirs = getattr(transformers, name)(TOKENIZER, **options)
    batch = ours(copies(samples))
    same_batch(batch, theirs(copies(samples)))
    longest = max(len(sample["input_ids"]) for sample in samples)
    expected = {"longest": -(-longest // 8) * 8, "max_length": 64, "do_not_pad": longest}
    assert batch["input_ids"].shape == (len(samples), expected[strategy.value])


class Padding(enum.Enum):
    """An enum of one's own, not a str: its values are what count."""

    LONGEST = "longest"
    MAX_LENGTH = "max_length"
    DO_NOT_PAD = "do_not_pad"


@pytest.mark.parametrize("name", PADDING_COLLATORS)
@pytest.mark.parametrize("strategy", list(Padding))
def test_any_enum_pads_as_its_value(name: str, strategy: Padding) -> None:
    samples = padding_samples(name, equal=strategy is Padding.DO_NOT_PAD)
    by_enum = getattr(accmt_collators, name)(TOKENIZER, **padding_options(strategy))
    by_name = getattr(accmt_collators, name)(TOKENIZER, **padding_options(strategy.value))
    same_batch(by_enum(copies(samples)), by_name(copies(samples)))


class Odd(enum.Enum):
    BOTH = "both"
    ONE = 1


@pytest.mark.parametrize("name", PADDING_COLLATORS)
@pytest.mark.parametrize("padding", [Odd.BOTH, Odd.ONE, 1, None])
def test_other_padding_values_are_refused_naming_the_parameter(name: str, padding: Any) -> None:
    refused = rf"{name}: padding must be True, .*got {re.escape(repr(padding))}$"
    with pytest.raises(CollatorError, match=refused):
        getattr(accmt_collators, name)(TOKENIZER, padding=padding)
