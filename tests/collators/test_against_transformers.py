"""accmt's collators beside transformers' for the options they share: ``padding=`` as
transformers' ``PaddingStrategy``, ``seed=`` and ``return_tensors="np"``.

Padding is deterministic, so padded batches must equal transformers' to the value and dtype.
Masking draws differ by design (ours are a function of seed, epoch and sample), so there the
shapes, dtypes, padding and -100 labels must agree, and the draws by their rates.
"""

from __future__ import annotations

import enum
import inspect
import re
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
import transformers
from transformers.utils import PaddingStrategy

import accmt_collators
from accmt_collators import CollatorError

from ._kinds import TOKENIZER_COLLATORS, TOKENIZER_FREE_COLLATORS
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


# Real texts of different lengths, about 100 tokens each: padding in every batch.
MASK_SAMPLES = encoded([text[: 250 + 7 * i] for i, text in enumerate(TEXTS[:64])], TOKENIZER)
# transformers 5 reads words from offsets it cannot pad: samples of one length, with offsets.
WORD_SAMPLES = encoded(
    [text for text in TEXTS if len(text) > 2000][:48],
    TOKENIZER,
    return_offsets_mapping=True,
    truncation=True,
    max_length=96,
)
# XLNet's scheme wants even lengths; transformers' collator cannot round them up.
PERMUTATION_ROWS = [s["input_ids"][: 40 + 2 * (i % 10)] for i, s in enumerate(MASK_SAMPLES)]


def ours_and_theirs(kind: str, seed: int | None) -> tuple[Any, Any]:
    """accmt's masking collator of ``kind`` and transformers' counterpart, both seeded.

    transformers 5 has no DataCollatorForWholeWordMask: its counterpart is
    DataCollatorForLanguageModeling(whole_word_mask=True), which masks every chosen token.
    Its permutation collator takes no seed.
    """
    if kind == "mlm":
        return (
            accmt_collators.DataCollatorForLanguageModeling(TOKENIZER, seed=seed),
            transformers.DataCollatorForLanguageModeling(TOKENIZER, seed=seed),
        )
    if kind == "whole_word":
        every = {"mask_replace_prob": 1.0, "random_replace_prob": 0.0, "seed": seed}
        return (
            accmt_collators.DataCollatorForWholeWordMask(TOKENIZER, **every),
            transformers.DataCollatorForLanguageModeling(TOKENIZER, whole_word_mask=True, **every),
        )
    return (
        accmt_collators.DataCollatorForPermutationLanguageModeling(
            TOKENIZER, pad_to_multiple_of=2, seed=seed
        ),
        transformers.DataCollatorForPermutationLanguageModeling(TOKENIZER),
    )


def masking_samples(kind: str) -> list[Any]:
    if kind == "permutation":
        return [list(row) for row in PERMUTATION_ROWS]
    return copies(WORD_SAMPLES if kind == "whole_word" else MASK_SAMPLES)


def same_batches(first: dict[str, Any], second: dict[str, Any]) -> bool:
    return first.keys() == second.keys() and all((first[key] == second[key]).all() for key in first)


MASKING_KINDS = ["mlm", "whole_word", "permutation"]


@pytest.mark.parametrize("kind", MASKING_KINDS)
def test_one_seed_gives_one_batch_from_the_first_call(kind: str) -> None:
    ours, theirs = ours_and_theirs(kind, 42)
    again, _ = ours_and_theirs(kind, 42)
    other, _ = ours_and_theirs(kind, 43)
    first = ours(masking_samples(kind))
    assert same_batches(first, again(masking_samples(kind)))
    assert not same_batches(first, other(masking_samples(kind)))
    if kind != "permutation":  # transformers' seed= means the same
        _, their_again = ours_and_theirs(kind, 42)
        their_first = theirs(masking_samples(kind))
        assert same_batches(their_first, their_again(masking_samples(kind)))


SPECIAL = torch.tensor(TOKENIZER.all_special_ids)
# The share of eligible tokens each kind chooses: p = 0.15 of tokens (or of words, so of
# tokens too), and for XLNet's spans of 1 to 5 tokens one per 6 times its length: 1/6.
RATES = {"mlm": 0.15, "whole_word": 0.15, "permutation": 1 / 6}


def original_ids(kind: str) -> torch.Tensor:
    samples = masking_samples(kind)
    if kind == "permutation":
        samples = [{"input_ids": row} for row in samples]
    return transformers.DataCollatorWithPadding(TOKENIZER)(samples)["input_ids"]


SEEDS = 64


def chosen_share(kind: str, collator: Callable[[int], Any]) -> float:
    """The share of eligible tokens chosen in the first batch of collators seeded 0 to 63,
    after checking that special tokens and padding never are. (Words and spans are chosen in
    runs: with fewer batches, a share's spread is as wide as the tolerance.)"""
    original = original_ids(kind)
    eligible = ~torch.isin(original, SPECIAL)
    chosen = 0
    for seed in range(SEEDS):
        # transformers' permutation collator takes no seed: it draws from the global generators.
        torch.manual_seed(seed)
        np.random.seed(seed)
        labels = torch.as_tensor(collator(seed)(masking_samples(kind))["labels"])
        assert labels.shape == original.shape
        assert not ((labels != -100) & ~eligible).any(), "a special token or padding chosen"
        chosen += int((labels != -100).sum())
    return chosen / (SEEDS * int(eligible.sum()))


class ShiftingModel:
    """Stands in for an encoder-decoder model: decoder inputs are the labels shifted right.

    transformers hands it numpy labels in an "np" batch, accmt a tensor (a torch model's
    method shifts tensors); it shifts either.
    """

    def prepare_decoder_input_ids_from_labels(self, labels: Any) -> Any:
        shifted = labels.copy() if isinstance(labels, np.ndarray) else labels.clone()
        shifted[:, 1:] = labels[:, :-1]
        shifted[:, 0] = 2
        shifted[shifted == -100] = 0
        return shifted


def same_arrays(got: dict[str, Any], expected: dict[str, Any]) -> None:
    """Equal keys, and under each a numpy array of the same dtype and values (or None)."""
    assert set(got) == set(expected), (sorted(got), sorted(expected))
    for key, value in expected.items():
        if value is None:
            assert got[key] is None, key
            continue
        assert isinstance(got[key], np.ndarray), (key, type(got[key]))
        assert got[key].dtype == value.dtype, (key, got[key].dtype, value.dtype)
        assert np.array_equal(got[key], value), key


@pytest.mark.parametrize("name", PADDING_COLLATORS)
@pytest.mark.parametrize("strategy", list(PaddingStrategy))
def test_np_padding_batches_equal_transformers(name: str, strategy: PaddingStrategy) -> None:
    samples = padding_samples(name, equal=strategy is PaddingStrategy.DO_NOT_PAD)
    options = {**padding_options(strategy), "return_tensors": "np"}
    if name == "DataCollatorForSeq2Seq":
        options["model"] = ShiftingModel()
    ours = getattr(accmt_collators, name)(TOKENIZER, **options)
    theirs = getattr(transformers, name)(TOKENIZER, **options)
    same_arrays(ours(copies(samples)), theirs(copies(samples)))


def test_np_scores_are_float64_as_transformers_makes_them() -> None:
    samples = [{**sample, "label": 0.1 * index} for index, sample in enumerate(MASK_SAMPLES[:4])]
    ours = accmt_collators.DataCollatorWithPadding(TOKENIZER, return_tensors="np")
    theirs = transformers.DataCollatorWithPadding(TOKENIZER, return_tensors="np")
    batch = ours(copies(samples))
    same_arrays(batch, theirs(copies(samples)))
    assert batch["labels"].dtype == np.float64
    assert batch["labels"][1] == 0.1  # not float32's 0.10000000149


@pytest.mark.parametrize("bare", [False, True])
def test_np_causal_batches_equal_transformers(bare: bool) -> None:
    rows = [sample["input_ids"] for sample in MASK_SAMPLES[:8]]
    samples = rows if bare else [{"input_ids": row} for row in rows]
    options: dict[str, Any] = {"mlm": False, "pad_to_multiple_of": 8, "return_tensors": "np"}
    ours = accmt_collators.DataCollatorForLanguageModeling(TOKENIZER, **options)
    theirs = transformers.DataCollatorForLanguageModeling(TOKENIZER, **options)
    same_arrays(ours(list(samples)), theirs(list(samples)))


def np_pair(kind: str, seed: int) -> tuple[Any, Any]:
    ours, theirs = ours_and_theirs(kind, seed)
    ours = type(ours)(**{**option_values(ours), "return_tensors": "np"})
    theirs.return_tensors = "np"  # a dataclass: read at each call
    return ours, theirs


def option_values(collator: Any) -> dict[str, Any]:
    """The options a collator of ours was built with, by its constructor's names."""
    signature = inspect.signature(type(collator))
    return {name: getattr(collator, name) for name in signature.parameters}


# Words and spans choose tokens in runs: their shares vary more than single tokens'.
TOLERANCES = {"mlm": 0.01, "whole_word": 0.015, "permutation": 0.03}


@pytest.mark.parametrize("return_tensors", ["pt", "np"])
@pytest.mark.parametrize("kind", MASKING_KINDS)
def test_seeded_first_batches_choose_at_transformers_rate(kind: str, return_tensors: str) -> None:
    def side(index: int) -> Callable[[int], Any]:
        def collator(seed: int) -> Any:
            pair = np_pair(kind, seed) if return_tensors == "np" else ours_and_theirs(kind, seed)
            return pair[index]

        return collator

    ours, theirs = chosen_share(kind, side(0)), chosen_share(kind, side(1))
    assert abs(ours - RATES[kind]) < TOLERANCES[kind], ours
    assert abs(theirs - RATES[kind]) < TOLERANCES[kind], theirs


@pytest.mark.parametrize("kind", MASKING_KINDS)
def test_np_masking_batches_hold_what_transformers_do(kind: str) -> None:
    ours, theirs = np_pair(kind, 7)
    got, expected = ours(masking_samples(kind)), theirs(masking_samples(kind))
    assert set(got) == set(expected)
    for key, value in expected.items():
        assert isinstance(got[key], np.ndarray), key
        assert (got[key].shape, got[key].dtype) == (value.shape, value.dtype), key
    original = original_ids(kind).numpy()
    eligible = ~np.isin(original, SPECIAL.numpy())
    for batch in (got, expected):
        chosen = batch["labels"] != -100
        assert not (chosen & ~eligible).any(), "a special token or padding was chosen"
        assert np.array_equal(batch["labels"][chosen], original[chosen])
        assert (batch["input_ids"][~eligible] == original[~eligible]).all()
    # The draws are the seed's: the "np" batch is the "pt" batch, as arrays.
    as_tensors = ours_and_theirs(kind, 7)[0](masking_samples(kind))
    for key, value in as_tensors.items():
        assert np.array_equal(got[key], value.numpy()), key


# return_tensors is every collator's: 1.x's six are built with a tokenizer, the others without.
ALL_COLLATORS = TOKENIZER_COLLATORS + TOKENIZER_FREE_COLLATORS


def build(name: str, **options: Any) -> Any:
    arguments = (TOKENIZER,) if name in TOKENIZER_COLLATORS else ()
    return getattr(accmt_collators, name)(*arguments, **options)


@pytest.mark.parametrize("name", ALL_COLLATORS)
@pytest.mark.parametrize("value", ["tf", "jax", "PT", None])
def test_other_return_tensors_are_refused_naming_the_parameter(name: str, value: Any) -> None:
    with pytest.raises(CollatorError, match=rf"{name}: return_tensors must be 'pt' .* 'np'"):
        build(name, return_tensors=value)


@pytest.mark.parametrize("name", ALL_COLLATORS)
def test_np_without_numpy_says_to_install_it(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "numpy", None)  # import numpy now fails
    with pytest.raises(ImportError, match=rf"{name}: return_tensors='np' needs numpy.*pip install"):
        build(name, return_tensors="np")
    build(name, return_tensors="pt")
