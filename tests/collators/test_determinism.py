"""The masking collators' draws are a function of (seed, epoch, sample) and nothing else:
not the batch a sample lands in, its padding side, its input type, or the worker or process
that collates it."""

from __future__ import annotations

import random
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils.data import DataLoader

from accmt_collators import (
    DataCollatorForLanguageModeling,
    DataCollatorForPermutationLanguageModeling,
    DataCollatorForWholeWordMask,
)

from ._text import TinyTokenizer, as_kind, token_rows, wordpiece

MASKING = [DataCollatorForLanguageModeling, DataCollatorForWholeWordMask]


def per_sample(batch: dict[str, torch.Tensor], lengths: list[int], side: str) -> list[Any]:
    """Each sample's own (unpadded) inputs and labels."""
    found = []
    for row, length in enumerate(lengths):
        cut = slice(0, length) if side == "right" else slice(-length, None)
        found.append((batch["input_ids"][row, cut].tolist(), batch["labels"][row, cut].tolist()))
    return found


def masked(collate: Any, rows: list[list[int]], side: str = "right") -> list[Any]:
    return per_sample(collate([{"input_ids": r} for r in rows]), [len(r) for r in rows], side)


@settings(settings.get_profile("collators"))
@given(
    st.integers(2, 10).flatmap(token_rows),
    st.randoms(use_true_random=False),
    st.sampled_from(MASKING),
    st.sampled_from(["list", "tensor", "numpy"]),
)
def test_a_sample_is_masked_alike_in_any_batch(
    rows: list[list[int]], shuffle: random.Random, kind: Any, as_type: str
) -> None:
    right = kind(wordpiece("right"), mlm_probability=0.5, seed=7)
    left = kind(wordpiece("left"), mlm_probability=0.5, seed=7, pad_to_multiple_of=8)
    right.set_epoch(2)
    left.set_epoch(2)
    alone = [masked(right, [row])[0] for row in rows]
    assert masked(right, rows) == alone
    order = list(range(len(rows)))
    shuffle.shuffle(order)
    some = order[: shuffle.randint(1, len(rows))]
    assert masked(left, [rows[i] for i in some], "left") == [alone[i] for i in some]
    typed = right([{"input_ids": as_kind(r, as_type)} for r in rows])
    assert per_sample(typed, [len(r) for r in rows], "right") == alone


def test_epochs_and_seeds_change_the_masks_and_come_back() -> None:
    rows = [[2, *range(10, 60), 3]] * 1 + [[2, *range(70, 110), 3]]
    collate = DataCollatorForLanguageModeling(wordpiece(), seed=1)
    by_epoch = []
    for epoch in (0, 1, 0):
        collate.set_epoch(epoch)
        by_epoch.append(masked(collate, rows))
    assert by_epoch[0] == by_epoch[2]
    assert by_epoch[0] != by_epoch[1]
    other = DataCollatorForLanguageModeling(wordpiece(), seed=2)
    other.set_epoch(0)
    assert masked(other, rows) != by_epoch[0]


def test_nested_places_of_one_sample_are_masked_independently() -> None:
    encoding = {"input_ids": [2, *range(10, 70), 3]}
    collate = DataCollatorForLanguageModeling(wordpiece(), seed=1)
    collate.set_epoch(0)
    first, second = collate([(encoding, encoding)])
    assert not torch.equal(first["labels"], second["labels"])


def test_without_a_seed_set_epoch_takes_torch_s_seed() -> None:
    rows = [[2, *range(10, 60), 3]]
    torch.manual_seed(5)
    implicit = DataCollatorForLanguageModeling(wordpiece())
    implicit.set_epoch(0)
    assert implicit.seed == 5
    explicit = DataCollatorForLanguageModeling(wordpiece(), seed=5)
    explicit.set_epoch(0)
    assert masked(implicit, rows) == masked(explicit, rows)


def test_without_a_seed_batches_before_set_epoch_draw_from_torch_s_generator() -> None:
    rows = [[2, *range(10, 60), 3]]
    collate = DataCollatorForLanguageModeling(wordpiece())
    assert collate.epoch is None
    torch.manual_seed(0)
    first, second = masked(collate, rows), masked(collate, rows)
    torch.manual_seed(0)
    assert masked(collate, rows) == first
    assert second != first
    assert collate.seed is None


@pytest.mark.parametrize("kind", [*MASKING, DataCollatorForPermutationLanguageModeling])
def test_with_a_seed_batches_before_set_epoch_are_epoch_0_s(kind: Any) -> None:
    rows = [[2, *range(10, 60), 3], [2, *range(70, 110), 3]]
    collate = kind(wordpiece(), seed=5, pad_to_multiple_of=2)
    assert collate.epoch is None
    torch.manual_seed(0)
    first = collate(rows)
    torch.manual_seed(1)  # torch's generator plays no part
    again = collate(rows)
    collate.set_epoch(0)
    at_zero = collate(rows)
    collate.set_epoch(1)
    at_one = collate(rows)
    for key, value in first.items():
        assert torch.equal(again[key], value), key
        assert torch.equal(at_zero[key], value), key
    assert not torch.equal(at_one["labels"], first["labels"])


def test_permutation_spans_are_the_sample_s_own() -> None:
    rows = [[2, *range(10 + i, 40 + 3 * i), 3] for i in range(0, 12, 3)]
    rows += [[*row[:-2], 3] for row in rows]  # odd lengths too
    collate = DataCollatorForPermutationLanguageModeling(wordpiece(), pad_to_multiple_of=2, seed=3)
    collate.set_epoch(1)
    together = collate(rows)["labels"]
    for index, row in enumerate(rows):
        alone = collate([row])["labels"][0]
        assert torch.equal(together[index, : len(row)], alone[: len(row)])


class Sentences(torch.utils.data.Dataset[dict[str, list[int]]]):
    def __init__(self) -> None:
        generator = torch.Generator().manual_seed(0)
        lengths = torch.randint(3, 20, (24,), generator=generator).tolist()
        self.rows = [torch.randint(5, 50, (n,), generator=generator).tolist() for n in lengths]

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index: int) -> dict[str, list[int]]:
        return {"input_ids": self.rows[index]}


@pytest.mark.parametrize("persistent", [False, True])
def test_dataloader_workers_mask_as_the_main_process(persistent: bool) -> None:
    collate = DataCollatorForLanguageModeling(TinyTokenizer(), mlm_probability=0.4, seed=9)
    dataset = Sentences()
    loader = DataLoader(
        dataset, batch_size=4, collate_fn=collate, num_workers=2, persistent_workers=persistent
    )
    for epoch in range(2):
        collate.set_epoch(epoch)
        in_workers = [batch["labels"] for batch in loader]
        here = [collate([dataset[i] for i in range(s, s + 4)])["labels"] for s in range(0, 24, 4)]
        assert all(torch.equal(a, b) for a, b in zip(in_workers, here, strict=True)), epoch
