"""A tokenizer is only the attributes a collator reads: no transformers needed."""

from __future__ import annotations

import torch

from accmt_collators import DataCollatorForLanguageModeling, DataCollatorWithPadding

from ._text import CLS, MASK, PAD, SEP, TinyTokenizer


def test_special_tokens_come_from_the_token_id_attributes_and_size_from_vocab_size() -> None:
    tokenizer = TinyTokenizer(vocabulary=12)
    collate = DataCollatorForLanguageModeling(
        tokenizer, mlm_probability=1.0, mask_replace_prob=0.0, random_replace_prob=1.0, seed=0
    )
    collate.set_epoch(0)
    rows = [[CLS, *range(5, 12), SEP], [CLS, 7, SEP]]
    batch = collate(rows)
    labels, inputs = batch["labels"], batch["input_ids"]
    special = torch.isin(
        labels.new_tensor([[CLS, *range(5, 12), SEP], [CLS, 7, SEP] + [PAD] * 6]),
        torch.tensor([PAD, CLS, SEP, MASK]),
    )
    assert torch.equal(labels == -100, special)
    assert ((inputs >= 0) & (inputs < 12)).all()
    assert set(inputs[~special].tolist()) != set(labels[~special].tolist())


def test_padding_side_and_pad_id_are_read_at_each_call() -> None:
    tokenizer = TinyTokenizer()
    collate = DataCollatorWithPadding(tokenizer)
    samples = [{"input_ids": [7]}, {"input_ids": [7, 8]}]
    assert collate(samples)["input_ids"].tolist() == [[7, PAD], [7, 8]]
    tokenizer.padding_side, tokenizer.pad_token_id = "left", 9
    assert collate(samples)["input_ids"].tolist() == [[9, 7], [7, 8]]
    assert collate(samples)["attention_mask"].tolist() == [[0, 1], [1, 1]]
