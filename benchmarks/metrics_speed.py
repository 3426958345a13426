"""add_batch + compute over 1M samples, next to the same arithmetic written directly in torch.

./hatchw run python benchmarks/metrics_speed.py

Both sides see the same pre-made CPU batches. The direct side keeps running sums per batch (the
least a hand-written loop must do); the metric keeps one small column per sample, then joins
and reduces them at compute(), which is what lets it drop padding and gather exactly across
processes. One process here, so no synchronisation is timed.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from _timing import interleaved_medians
from torch import Tensor

from accmt_metrics import F1, Accuracy, Mean, MeanSquaredError, Metric, Perplexity

SAMPLES = 1_000_000
BATCH = 1_000
CLASSES = 10
VOCABULARY = 32
REPEATS = 7

Batches = list[tuple[Tensor, Tensor]]


def make_batches(generator: torch.Generator) -> dict[str, Batches]:
    def batched(predictions: Tensor, references: Tensor) -> Batches:
        return list(zip(predictions.split(BATCH), references.split(BATCH), strict=True))

    scores = torch.randn(SAMPLES, CLASSES, generator=generator)
    labels = torch.randint(0, CLASSES, (SAMPLES,), generator=generator)
    predictions = torch.randn(SAMPLES, generator=generator)
    targets = torch.randn(SAMPLES, generator=generator)
    logits = torch.randn(SAMPLES, VOCABULARY, generator=generator)
    tokens = torch.randint(0, VOCABULARY, (SAMPLES,), generator=generator)
    return {
        "classes": batched(scores, labels),
        "regression": batched(predictions, targets),
        "losses": batched(predictions, predictions),
        "tokens": batched(logits, tokens),
    }


def with_metric(make: Callable[[], Metric], batches: Batches) -> float:
    metric = make()
    for predictions, references in batches:
        if isinstance(metric, Mean):
            metric.add_batch(predictions)
        else:
            metric.add_batch(predictions, references)
    return next(iter(metric.compute().values()))


def direct_accuracy(batches: Batches) -> float:
    correct, total = 0, 0
    for scores, labels in batches:
        correct += int((scores.argmax(dim=1) == labels).sum())
        total += len(labels)
    return correct / total


def direct_f1(batches: Batches) -> float:
    true_positives = torch.zeros(CLASSES, dtype=torch.int64)
    predicted = torch.zeros(CLASSES, dtype=torch.int64)
    actual = torch.zeros(CLASSES, dtype=torch.int64)
    for scores, labels in batches:
        guesses = scores.argmax(dim=1)
        true_positives += torch.bincount(labels[guesses == labels], minlength=CLASSES)
        predicted += torch.bincount(guesses, minlength=CLASSES)
        actual += torch.bincount(labels, minlength=CLASSES)
    denominator = (predicted + actual).double()
    per_class = torch.where(denominator > 0, 2 * true_positives / denominator.clamp(min=1), 0.0)
    return float(per_class.mean())


def direct_mse(batches: Batches) -> float:
    total = torch.zeros((), dtype=torch.float64)
    for predictions, targets in batches:
        total += (predictions.double() - targets.double()).square().sum()
    return float(total) / SAMPLES


def direct_mean(batches: Batches) -> float:
    total = torch.zeros((), dtype=torch.float64)
    for values, _ in batches:
        total += values.double().sum()
    return float(total) / SAMPLES


def direct_perplexity(batches: Batches) -> float:
    total = torch.zeros((), dtype=torch.float64)
    for logits, tokens in batches:
        total += F.cross_entropy(logits, tokens, reduction="sum").double()
    return float(torch.exp(total / SAMPLES))


def main() -> None:
    batches = make_batches(torch.Generator().manual_seed(0))
    cases: dict[str, tuple[str, Callable[[], Metric], Callable[[Batches], float]]] = {
        "Accuracy": ("classes", Accuracy, direct_accuracy),
        "F1 macro (num_classes)": ("classes", lambda: F1("macro", CLASSES), direct_f1),
        "MeanSquaredError": ("regression", MeanSquaredError, direct_mse),
        "Mean": ("losses", Mean, direct_mean),
        "Perplexity": ("tokens", Perplexity, direct_perplexity),
    }
    print(
        f"{SAMPLES:,} samples in batches of {BATCH:,}, CPU, {torch.get_num_threads()} threads; "
        f"median of {REPEATS} interleaved runs each"
    )
    print(f"  {'metric':<24} {'accmt_metrics':>14} {'direct torch':>13} {'ratio':>7}  agree")
    for label, (kind, make, direct) in cases.items():
        medians, results = timed(make, direct, batches[kind])
        agree = abs(results["metric"] - results["direct"]) <= 1e-6 * abs(results["direct"])
        print(
            f"  {label:<24} {medians['metric'] * 1000:11.1f} ms {medians['direct'] * 1000:10.1f} ms"
            f" {medians['metric'] / medians['direct']:6.2f}x  {'yes' if agree else 'NO'}"
        )


def timed(
    make: Callable[[], Metric], direct: Callable[[Batches], float], data: Batches
) -> tuple[dict[str, float], dict[str, float]]:
    """Median seconds of the metric and of the direct computation, and what each returned."""
    results: dict[str, float] = {}

    def run_metric() -> None:
        results["metric"] = with_metric(make, data)

    def run_direct() -> None:
        results["direct"] = direct(data)

    return interleaved_medians({"metric": run_metric, "direct": run_direct}, REPEATS), results


if __name__ == "__main__":
    main()
