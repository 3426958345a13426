"""Hypothesis strategies and helpers shared by the metric tests."""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence

import torch
from hypothesis import strategies as st
from torch import Tensor

from accmt_metrics import Metric


@st.composite
def cuts(draw: st.DrawFn, total: int) -> list[int]:
    """Sorted places at which to cut ``total`` samples into batches (empty batches allowed)."""
    return sorted(draw(st.lists(st.integers(0, total), max_size=5)))


def split(tensors: Sequence[Tensor], at: Sequence[int]) -> Iterator[list[Tensor]]:
    """The rows of ``tensors`` in consecutive batches, cut at ``at``."""
    bounds = [0, *at, len(tensors[0])]
    for start, stop in itertools.pairwise(bounds):
        yield [tensor[start:stop] for tensor in tensors]


def feed(metric: Metric, predictions: Tensor, references: Tensor, at: Sequence[int] = ()) -> Metric:
    """Add the samples to ``metric`` in batches cut at ``at``, and return it."""
    for batch_predictions, batch_references in split([predictions, references], at):
        metric.add_batch(batch_predictions, batch_references)
    return metric


@st.composite
def classification(
    draw: st.DrawFn, min_classes: int = 2, distinct_scores: bool = False
) -> tuple[Tensor, Tensor, int]:
    """Scores of shape (n, classes), labels of shape (n,), and the number of classes.

    With ``distinct_scores`` every row's scores are a permutation, so top-k has no ties.
    """
    classes = draw(st.integers(min_classes, 7))
    rows = draw(st.integers(1, 40))
    seed = draw(st.integers(0, 2**31 - 1))
    generator = torch.Generator().manual_seed(seed)
    if distinct_scores:
        scores = torch.stack([torch.randperm(classes, generator=generator) for _ in range(rows)])
        scores = scores.double()
    else:
        # Few distinct values, so that ties and absent classes happen.
        scores = torch.randint(0, 4, (rows, classes), generator=generator).double()
    # Labels drawn from a subset of the classes, so some class may be absent.
    present = draw(st.integers(1, classes))
    labels = torch.randint(0, present, (rows,), generator=generator)
    return scores, labels, classes
