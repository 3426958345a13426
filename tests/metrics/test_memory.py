"""The built-ins keep sums: what they hold after a million samples is what they hold after a
thousand. Measured on the metric's own tensors (every tensor reachable from the object, by the
bytes of its storage), not on the process's memory."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
import torch
from torch import Tensor

from accmt_metrics import (
    F1,
    Accuracy,
    Mean,
    MeanAbsoluteError,
    MeanSquaredError,
    Metric,
    Perplexity,
    PerSampleMetric,
    Precision,
    Recall,
)

BATCH = 1_000
CLASSES = 10
VOCABULARY = 8
GENERATOR = torch.Generator().manual_seed(0)
SCORES = torch.randn(BATCH, CLASSES, generator=GENERATOR)
LABELS = torch.randint(0, CLASSES, (BATCH,), generator=GENERATOR)
VALUES = torch.randn(BATCH, 3, generator=GENERATOR)
LOGITS = torch.randn(BATCH, 4, VOCABULARY, generator=GENERATOR)
TOKENS = torch.randint(0, VOCABULARY, (BATCH, 4), generator=GENERATOR)

# Each built-in with one batch of BATCH samples it takes.
BUILT_INS: dict[str, tuple[Callable[[], Metric], tuple[Tensor, ...]]] = {
    "accuracy": (Accuracy, (SCORES, LABELS)),
    "top3_accuracy": (lambda: Accuracy(top_k=3), (SCORES, LABELS)),
    "accuracy_of_labels": (Accuracy, (SCORES.argmax(1), LABELS)),
    "precision_macro": (Precision, (SCORES, LABELS)),
    "recall_micro": (lambda: Recall("micro"), (SCORES, LABELS)),
    "f1_of_labels": (F1, (SCORES.argmax(1), LABELS)),
    "f1_num_classes": (lambda: F1(num_classes=CLASSES), (SCORES.argmax(1), LABELS)),
    "mse": (MeanSquaredError, (VALUES, VALUES.flip(0))),
    "mae": (MeanAbsoluteError, (VALUES, VALUES.flip(0))),
    "mean": (Mean, (VALUES[:, 0],)),
    "perplexity": (lambda: Perplexity(causal=False), (LOGITS, TOKENS)),
}


def tensors_in(value: object, seen: set[int]) -> Iterator[Tensor]:
    """Every tensor reachable from ``value`` through attributes, lists, tuples and dicts."""
    if id(value) in seen:
        return
    seen.add(id(value))
    if isinstance(value, Tensor):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from tensors_in(item, seen)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from tensors_in(item, seen)
    elif hasattr(value, "__dict__"):
        yield from tensors_in(vars(value), seen)


def footprint(metric: Metric) -> int:
    """Bytes of the storages behind the metric's tensors, each storage once."""
    storages = {
        t.untyped_storage().data_ptr(): t.untyped_storage() for t in tensors_in(metric, set())
    }
    return sum(storage.nbytes() for storage in storages.values())


def fed(make: Callable[[], Metric], batch: tuple[Tensor, ...], batches: int) -> Metric:
    metric = make()
    for _ in range(batches):
        metric.add_batch(*batch)
    return metric


@pytest.mark.parametrize("key", sorted(BUILT_INS))
def test_the_footprint_after_a_million_samples_is_that_after_a_thousand(key: str) -> None:
    make, batch = BUILT_INS[key]
    small = fed(make, batch, 1)
    large = fed(make, batch, 1_000)
    assert footprint(small) == footprint(large)
    assert footprint(large) <= 16 * 1024  # counts, sums, a cached row of ones
    # The million samples were all counted: the result is the thousand's.
    assert large.compute() == pytest.approx(small.compute(), rel=1e-12)


class AbsoluteErrors(PerSampleMetric):
    """The other style, for contrast: it keeps a float per sample."""

    def per_sample(self, predictions: Tensor, references: Tensor) -> tuple[Tensor, ...]:
        return ((predictions - references).abs(),)

    def reduce(self, *columns: Tensor) -> float:
        return float(columns[0].median())


def test_a_per_sample_metric_grows_with_the_samples() -> None:
    batch = (VALUES[:, 0], VALUES[:, 1])
    small, large = fed(AbsoluteErrors, batch, 1), fed(AbsoluteErrors, batch, 100)
    assert large.compute() == small.compute()
    assert footprint(large) >= 100 * BATCH * VALUES.element_size() > footprint(small)
