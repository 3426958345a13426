"""Padding is dropped as each batch is added, by ``num_samples`` (Accelerate's order) or by
``mask``."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from accmt_metrics import F1, Accuracy, Mean, MeanSquaredError, Metric
from accmt_metrics._order import interleaved_positions, rows_before

from ._data import classification, cuts, feed, split

SETTINGS = settings(max_examples=40, deadline=None)
PADDING = -1


def deal_like_accelerate(size: int, batch: int, world: int, even: bool) -> list[list[list[int]]]:
    """The dataset indices each process gets from a prepared dataloader over ``range(size)``:
    batches dealt round-robin; with ``even`` the last batch is filled up and whole batches are
    added until every process has as many, all of padding (marked -1)."""
    batches = [list(range(start, min(start + batch, size))) for start in range(0, size, batch)]
    if even:
        batches[-1] += [PADDING] * (batch - len(batches[-1]))
        while len(batches) % world:
            batches.append([PADDING] * batch)
    return [batches[process::world] for process in range(world)]


@settings(max_examples=200, deadline=None)
@given(
    size=st.integers(1, 60),
    batch=st.integers(1, 7),
    world=st.integers(1, 4),
    even=st.booleans(),
)
def test_positions_put_dealt_batches_back_in_dataset_order(
    size: int, batch: int, world: int, even: bool
) -> None:
    dealt = deal_like_accelerate(size, batch, world, even)
    positions = interleaved_positions([[len(b) for b in batches] for batches in dealt])
    placed: dict[int, int] = {}
    for batches, process_positions in zip(dealt, positions, strict=True):
        indices = [index for b in batches for index in b]
        assert len(indices) == len(process_positions)
        placed.update(zip(process_positions.tolist(), indices, strict=True))
    total = sum(len(p) for p in positions)
    # Every position once; the real samples first, in dataset order; padding after them.
    assert sorted(placed) == list(range(total))
    assert [placed[p] for p in range(size)] == list(range(size))
    assert all(placed[p] == PADDING for p in range(size, total))


def padded(tensor: torch.Tensor, extra: int) -> torch.Tensor:
    """``tensor`` with ``extra`` rows repeated from its start, as a sampler pads."""
    return torch.cat([tensor, tensor[:extra]])


@SETTINGS
@given(data=classification(), extra=st.integers(0, 20), at=st.data())
def test_num_samples_drops_the_padding_at_the_end(
    data: tuple[torch.Tensor, ...], extra: int, at: st.DataObject
) -> None:
    scores, labels, _ = data
    extra = min(extra, len(labels))
    padded_scores, padded_labels = padded(scores, extra), padded(labels, extra)
    cut = at.draw(cuts(len(padded_labels)))
    for make in (Accuracy, F1):
        clean = feed(make(), scores, labels).compute()
        metric = make(num_samples=len(labels))
        assert feed(metric, padded_scores, padded_labels, cut).compute() == clean


def test_without_num_samples_padding_counts() -> None:
    counted, cut = Accuracy(), Accuracy(num_samples=2)
    for metric in (counted, cut):
        metric.add_batch(torch.tensor([1, 0, 1]), torch.tensor([1, 1, 1]))
    assert counted.compute() == {"accuracy": 2 / 3}
    assert cut.compute() == {"accuracy": 1 / 2}


@settings(max_examples=300, deadline=None)
@given(
    size=st.integers(1, 60),
    batch=st.integers(1, 7),
    world=st.integers(1, 4),
    even=st.booleans(),
)
def test_each_batch_keeps_exactly_its_real_samples(
    size: int, batch: int, world: int, even: bool
) -> None:
    """The rule applied at add_batch, process by process, against the layout dealt."""
    dealt = deal_like_accelerate(size, batch, world, even)
    kept: list[int] = []
    for process, batches in enumerate(dealt):
        added = 0
        for indices in batches:
            real = rows_before(size, added, len(indices), process, world)
            # The kept rows are the batch's leading ones, and exactly its real samples.
            assert all(index != PADDING for index in indices[:real])
            assert all(index == PADDING for index in indices[real:])
            kept += indices[:real]
            added += len(indices)
    assert sorted(kept) == list(range(size))


@SETTINGS
@given(
    values=st.lists(st.floats(-100, 100), min_size=1, max_size=30),
    data=st.data(),
)
def test_mask_drops_what_it_marks(values: list[float], data: st.DataObject) -> None:
    keep = data.draw(st.lists(st.booleans(), min_size=len(values), max_size=len(values)))
    if not any(keep):
        keep[0] = True
    tensor = torch.tensor(values, dtype=torch.float64)
    mask = torch.tensor(keep)
    cut = data.draw(cuts(len(values)))
    for make in (Mean, lambda: MeanSquaredError()):
        metric: Metric = make()
        for batch_values, batch_mask in split([tensor, mask], cut):
            if isinstance(metric, Mean):
                metric.add_batch(batch_values, mask=batch_mask)
            else:
                metric.add_batch(batch_values, torch.zeros_like(batch_values), mask=batch_mask)
        reference: Metric = make()
        if isinstance(reference, Mean):
            reference.add_batch(tensor[mask])
        else:
            reference.add_batch(tensor[mask], torch.zeros_like(tensor[mask]))
        assert metric.compute() == pytest.approx(reference.compute(), rel=1e-12)


def test_mask_on_some_batches_only() -> None:
    metric = Accuracy()
    metric.add_batch(torch.tensor([1, 1]), torch.tensor([1, 0]))
    metric.add_batch(torch.tensor([0, 0]), torch.tensor([1, 0]), mask=torch.tensor([False, True]))
    metric.add_batch(torch.tensor([2]), torch.tensor([2]))
    assert metric.compute() == {"accuracy": 3 / 4}


def test_num_samples_counts_masked_positions_then_the_mask_drops() -> None:
    metric = Accuracy(num_samples=3)
    metric.add_batch(
        torch.tensor([1, 0, 1, 0]),
        torch.tensor([1, 1, 1, 1]),
        mask=torch.tensor([True, False, True, True]),
    )
    # Positions 0..2 survive num_samples; the mask then drops position 1.
    assert metric.compute() == {"accuracy": 1.0}
