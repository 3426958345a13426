"""Tokenizers built here, with no download, and samples for the collator tests.

transformers appears only as a test reference: a WordPiece tokenizer (BERT's kind, '##'
marking a word's rest) is trained in about a second on the help texts CPython ships, and
wrapped in ``PreTrainedTokenizerFast``.
"""

from __future__ import annotations

import functools
import pydoc_data.topics
from typing import Any

import torch
from hypothesis import strategies as st
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
PAD, UNK, CLS, SEP, MASK = range(len(SPECIALS))
TEXTS = sorted(pydoc_data.topics.topics.values())


@functools.cache
def _wordpiece() -> Tokenizer:
    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(vocab_size=1500, special_tokens=SPECIALS)
    tokenizer.train_from_iterator(TEXTS, trainer)
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", CLS), ("[SEP]", SEP)],
    )
    return tokenizer


def wordpiece(padding_side: str = "right") -> PreTrainedTokenizerFast:
    """A BERT-like transformers tokenizer trained on CPython's help texts."""
    return PreTrainedTokenizerFast(
        tokenizer_object=_wordpiece(),
        padding_side=padding_side,
        pad_token="[PAD]",
        unk_token="[UNK]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
    )


class TinyTokenizer:
    """A tokenizer that is no more than the attributes the collators read."""

    def __init__(self, padding_side: str = "right", vocabulary: int = 50) -> None:
        self.pad_token_id: int | None = PAD
        self.mask_token_id: int | None = MASK
        self.cls_token_id = CLS
        self.sep_token_id = SEP
        self.padding_side = padding_side
        self.vocab_size = vocabulary


def encoded(texts: list[str], tokenizer: PreTrainedTokenizerFast, **options: Any) -> list[Any]:
    """The tokenizer's encodings of ``texts``, one plain dict per text."""
    return [dict(tokenizer(text, **options)) for text in texts]


def words(size: int = 1500) -> st.SearchStrategy[int]:
    return st.integers(len(SPECIALS), size - 1)


@st.composite
def token_rows(draw: st.DrawFn, count: int, equal: bool = False) -> list[list[int]]:
    """``count`` rows of token ids framed by [CLS] and [SEP] (one length when ``equal``)."""
    lengths = [draw(st.integers(0, 30))] * count if equal else None
    rows = []
    for index in range(count):
        length = lengths[index] if lengths else draw(st.integers(0, 30))
        rows.append([CLS, *draw(st.lists(words(), min_size=length, max_size=length)), SEP])
    return rows


def as_kind(row: list[int], kind: str) -> Any:
    """A row as a list, a tensor or a numpy array."""
    if kind == "tensor":
        return torch.tensor(row)
    if kind == "numpy":
        return torch.tensor(row).numpy()
    return row


def same_batch(got: dict[str, Any], expected: Any) -> None:
    """Equal keys, and equal tensors (values, shapes and dtypes) under each."""
    expected = dict(expected)
    assert set(got) == set(expected), (sorted(got), sorted(expected))
    for key, value in expected.items():
        if value is None:
            assert got[key] is None, key
            continue
        assert got[key].dtype == value.dtype, (key, got[key].dtype, value.dtype)
        assert torch.equal(got[key], value), (key, got[key], value)
