"""Run by tests/distributed/test_metrics.py on each process of a real launch.

Every process builds the same uneven dataset, makes a gloo group, lets Accelerate shard the
dataset exactly as a training script would (a prepared DataLoader, ``even_batches`` on, so the
last round is padded with repeated samples), feeds every built-in metric and two torchmetrics
adapters, and writes what ``compute()`` returned to <out>/rank<N>.json. The same is done for
every other way Accelerate deals batches (``split_batches``, ``even_batches=False``,
``dispatch_batches``, an iterable dataset), and through a ``DistributedSampler`` with a padding
mask; a few edge cases are recorded. The test computes the single-process results over the same
samples itself, with ``make_dataset``, ``make_metrics`` and ``feed`` from this module.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import torch
import torchmetrics
from torch.utils.data import DataLoader, DistributedSampler, IterableDataset, TensorDataset

from accmt_metrics import (
    F1,
    Accuracy,
    Mean,
    MeanAbsoluteError,
    MeanSquaredError,
    Metric,
    MetricError,
    Perplexity,
    Precision,
    Recall,
    TorchMetricsAdapter,
)

# 203 samples in batches of 16: 13 batches, the last of 11. With 2 or 3 processes neither the
# number of batches nor the number of samples divides evenly, so Accelerate pads.
DATASET_SIZE = 203
BATCH_SIZE = 16
CLASSES = 5
OUTPUTS = 3
TOKENS = 6
VOCABULARY = 7


def make_dataset(size: int = DATASET_SIZE) -> TensorDataset:
    """The same samples on every process and in the test: index, scores, labels, regression
    predictions and targets, language-model logits and targets, a loss per sample."""
    generator = torch.Generator().manual_seed(1234)
    scores = torch.randn(size, CLASSES, generator=generator)
    # Labels that follow the scores more often than chance, and a class (CLASSES - 1) that is
    # rarely predicted, so that macro and micro averages differ.
    labels = torch.where(
        torch.rand(size, generator=generator) < 0.5,
        scores.argmax(dim=1),
        torch.randint(0, CLASSES, (size,), generator=generator),
    )
    predictions = torch.randn(size, OUTPUTS, generator=generator)
    targets = predictions + 0.5 * torch.randn(size, OUTPUTS, generator=generator)
    logits = torch.randn(size, TOKENS, VOCABULARY, generator=generator)
    tokens = torch.randint(0, VOCABULARY, (size, TOKENS), generator=generator)
    tokens[torch.rand(size, TOKENS, generator=generator) < 0.2] = -100
    losses = torch.rand(size, generator=generator) * 3
    return TensorDataset(
        torch.arange(size), scores, labels, predictions, targets, logits, tokens, losses
    )


def make_metrics(num_samples: int | None) -> dict[str, Metric]:
    """Every built-in, in the variants the test compares, and two torchmetrics adapters."""
    from torchmetrics.classification import MulticlassAccuracy

    return {
        "accuracy": Accuracy(num_samples=num_samples),
        "top2_accuracy": Accuracy(top_k=2, num_samples=num_samples),
        "precision_macro": Precision("macro", num_samples=num_samples),
        "precision_micro": Precision("micro", num_samples=num_samples),
        "recall_macro": Recall("macro", num_samples=num_samples),
        "recall_micro": Recall("micro", num_samples=num_samples),
        "f1_macro": F1("macro", num_samples=num_samples),
        "f1_micro": F1("micro", num_samples=num_samples),
        "f1_macro_7_classes": F1("macro", num_classes=CLASSES + 2, num_samples=num_samples),
        "mse": MeanSquaredError(num_samples=num_samples),
        "mae": MeanAbsoluteError(num_samples=num_samples),
        "mean": Mean(name="loss", num_samples=num_samples),
        "perplexity": Perplexity(causal=False, num_samples=num_samples),
        "torchmetrics_accuracy": TorchMetricsAdapter(
            MulticlassAccuracy(num_classes=CLASSES, average="macro"), num_samples=num_samples
        ),
        "torchmetrics_mse": TorchMetricsAdapter(
            torchmetrics.MeanSquaredError(), num_samples=num_samples
        ),
    }


def feed(metrics: dict[str, Metric], batch: list[torch.Tensor], mask: Any = None) -> None:
    """Give one batch of the dataset to each metric, in the form that metric takes."""
    _, scores, labels, predictions, targets, logits, tokens, losses = batch
    for key, metric in metrics.items():
        if key == "mean":
            metric.add_batch(losses, mask=mask)
        elif key in ("mse", "mae", "torchmetrics_mse"):
            metric.add_batch(predictions, targets, mask=mask)
        elif key == "perplexity":
            metric.add_batch(logits, tokens, mask=mask)
        else:
            metric.add_batch(scores, labels, mask=mask)


def compute_all(metrics: dict[str, Metric]) -> dict[str, dict[str, float]]:
    return {key: metric.compute() for key, metric in metrics.items()}


def through_accelerate(dataset: TensorDataset) -> dict[str, Any]:
    """Shard with Accelerate's prepared DataLoader; drop the padding with num_samples."""
    from accelerate import Accelerator

    accelerator = Accelerator(cpu=True)
    loader = accelerator.prepare(DataLoader(dataset, batch_size=BATCH_SIZE))
    metrics = make_metrics(num_samples=len(dataset))
    seen: list[int] = []
    for batch in loader:
        seen += batch[0].tolist()
        feed(metrics, batch)
    first = compute_all(metrics)
    return {
        "accelerate_state": accelerator.state.distributed_type.value,
        "seen": seen,
        "results": first,
        "again": compute_all(metrics),
    }


class Streamed(IterableDataset[tuple[torch.Tensor, ...]]):
    """The dataset as a stream, which Accelerate shards with IterableDatasetShard."""

    def __init__(self, dataset: TensorDataset) -> None:
        self.dataset = dataset

    def __iter__(self) -> Any:
        return (self.dataset[index] for index in range(len(self.dataset)))


# Every other way a prepared dataloader deals the batches: prepare_data_loader's options.
VARIANTS: dict[str, dict[str, Any]] = {
    "split_batches": {"split_batches": True},
    "uneven_batches": {"even_batches": False},
    "dispatched": {"dispatch_batches": True},
    "streamed": {"dispatch_batches": False},
}


def through_variants(dataset: TensorDataset, world: int) -> dict[str, Any]:
    """Each variant of Accelerate's sharding, padding dropped with num_samples."""
    from accelerate.data_loader import prepare_data_loader

    results: dict[str, Any] = {}
    for key, options in VARIANTS.items():
        source: Any = Streamed(dataset) if key == "streamed" else dataset
        # With split_batches a global batch is cut into one slice per process.
        size = BATCH_SIZE * world if options.get("split_batches") else BATCH_SIZE
        loader = prepare_data_loader(
            DataLoader(source, batch_size=size),
            device=torch.device("cpu"),
            put_on_device=True,
            **options,
        )
        metrics = make_metrics(num_samples=len(dataset))
        seen: list[int] = []
        for batch in loader:
            seen += batch[0].tolist()
            feed(metrics, batch)
        results[key] = {"seen": seen, "results": compute_all(metrics)}
    return results


def through_distributed_sampler(dataset: TensorDataset, rank: int, world: int) -> dict[str, Any]:
    """Shard with torch's DistributedSampler (one sample each in turn, padded by wrapping
    around); drop the padding with a mask, since this is not Accelerate's order."""
    sampler = DistributedSampler(dataset, num_replicas=world, rank=rank, shuffle=False)
    metrics = make_metrics(num_samples=None)
    dealt = 0
    for batch in DataLoader(dataset, batch_size=BATCH_SIZE, sampler=sampler):
        rows = len(batch[0])
        # The k-th sample this process draws stands at k * world + rank of the padded order.
        positions = (torch.arange(dealt, dealt + rows)) * world + rank
        dealt += rows
        feed(metrics, batch, mask=positions < len(dataset))
    return {"results": compute_all(metrics)}


# The one batch that only the main process adds in edge_cases().
ONLY_MAIN_BATCH = (torch.tensor([1, 2, 3, 4]), torch.tensor([1, 2, 0, 4]))


def error_of(metric: Metric) -> str | None:
    try:
        metric.compute()
    except MetricError as error:
        return str(error)
    return None


def edge_cases(rank: int) -> dict[str, Any]:
    """A process that adds nothing, a compute before any sample anywhere, and batches not dealt
    as Accelerate deals them: every process must answer alike, and none may hang."""
    only_main = Accuracy()
    if rank == 0:
        only_main.add_batch(*ONLY_MAIN_BATCH)
    # Batches of sizes 3, 5, 7 on processes 0, 1, 2: the rule places the later processes'
    # samples too far, and compute() says so instead of returning a wrong number.
    misdealt = Accuracy(num_samples=6)
    rows = 3 + 2 * rank
    misdealt.add_batch(torch.zeros(rows, dtype=torch.long), torch.zeros(rows, dtype=torch.long))
    return {
        "only_main": only_main.compute(),
        "empty_error": error_of(F1()),
        "misdealt_error": error_of(misdealt),
    }


def main() -> None:
    out = Path(sys.argv[1])
    torch.distributed.init_process_group("gloo")
    rank, world = torch.distributed.get_rank(), torch.distributed.get_world_size()
    dataset = make_dataset()
    record = {
        "world": world,
        "accelerate": through_accelerate(dataset),
        "variants": through_variants(dataset, world),
        "sampler": through_distributed_sampler(dataset, rank, world),
        "edge": edge_cases(rank),
    }
    (out / f"rank{rank}.json").write_text(json.dumps(record))
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
