"""Run by tests/distributed/test_legacy_metrics.py on each process of a real launch.

accmt 1.x-style metrics (a subclass of ``accmt.metrics.Metric``, ``MetricParallel`` or
``MetricBatch`` overriding ``compute``) are fed an uneven dataset through Accelerate's prepared
DataLoader, which pads the last round with repeated samples; what ``compute()`` returns goes to
<out>/rank<N>.json. The test computes the same metrics over the same batches on one process.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import DataLoader, TensorDataset

from accmt.metrics import Metric, MetricBatch, MetricParallel

# 203 samples in batches of 16: neither the batches (13) nor the samples divide by 2 or 3.
DATASET_SIZE = 203
BATCH_SIZE = 16


class Accuracy(Metric):
    def compute(self, predictions, references):  # type: ignore[no-untyped-def]
        return {"accuracy": (predictions == references).sum() / predictions.shape[0]}


class ParallelAccuracy(MetricParallel):
    def compute(self, predictions, references):  # type: ignore[no-untyped-def]
        return {"parallel_accuracy": (predictions == references).sum() / predictions.shape[0]}


class BatchError(MetricBatch):
    def compute(self, predictions, references):  # type: ignore[no-untyped-def]
        return {"batch_error": (predictions - references).abs().mean()}


class Weighted(Metric):
    """A dict argument, three arguments, and a result that depends on the samples' order."""

    def compute(self, scores, labels, weights):  # type: ignore[no-untyped-def]
        hits = (scores["logits"].argmax(-1) == labels).float()
        order = torch.arange(1, len(labels) + 1, dtype=torch.float32)
        return {
            "weighted_accuracy": (hits * weights).sum() / weights.sum(),
            "first_hit_rank": float(order[hits.bool()][0]) if hits.any() else 0.0,
            "count": labels.shape[0],
        }


def make_dataset() -> TensorDataset:
    generator = torch.Generator().manual_seed(7)
    logits = torch.randn(DATASET_SIZE, 5, generator=generator)
    labels = torch.randint(0, 5, (DATASET_SIZE,), generator=generator)
    values = torch.randn(DATASET_SIZE, 3, generator=generator)
    targets = values + torch.randn(DATASET_SIZE, 3, generator=generator)
    weights = torch.rand(DATASET_SIZE, generator=generator)
    return TensorDataset(torch.arange(DATASET_SIZE), logits, labels, values, targets, weights)


def make_metrics(num_samples: int | None) -> list[Metric]:
    return [
        Accuracy("accuracy", num_samples=num_samples),
        ParallelAccuracy("parallel_accuracy", num_samples=num_samples),
        BatchError("batch_error", greater_is_better=False, num_samples=num_samples),
        Weighted("weighted", main_metric="weighted_accuracy", num_samples=num_samples),
    ]


def feed(metrics: list[Metric], batch: list[torch.Tensor]) -> None:
    _, logits, labels, values, targets, weights = batch
    accuracy, parallel, batch_error, weighted = metrics
    accuracy.add_batch(logits.argmax(-1), labels)
    parallel.add_batch(logits.argmax(-1), labels)
    batch_error.add_batch(values, targets)
    weighted.add_batch({"logits": logits}, labels, weights)


def compute_all(metrics: list[Metric]) -> dict[str, float]:
    return {key: value for metric in metrics for key, value in metric.compute().items()}


def main() -> None:
    from accelerate import Accelerator

    out = Path(sys.argv[1])
    accelerator = Accelerator(cpu=True)
    dataset = make_dataset()
    loader = accelerator.prepare(DataLoader(dataset, batch_size=BATCH_SIZE))
    metrics = make_metrics(num_samples=len(dataset))
    seen: list[int] = []
    for batch in loader:
        seen += batch[0].tolist()
        feed(metrics, batch)
    record: dict[str, Any] = {
        "world": accelerator.num_processes,
        "backend": str(torch.distributed.get_backend()),
        "seen": seen,
        "results": compute_all(metrics),
    }
    (out / f"rank{accelerator.process_index}.json").write_text(json.dumps(record))
    accelerator.end_training()  # also ends the process group


if __name__ == "__main__":
    main()
