"""Each built-in metric against the same arithmetic written directly in torch, and against the
torchmetrics metric of the same name; then the memory each holds after 10M samples.

./hatchw run python benchmarks/metrics_speed.py

Speed: add_batch for every batch, then compute(), over pre-made CPU batches of 32 and of 1024
samples, one thread, the three sides taken in turn (median of REPEATS runs). Times are the
process's CPU time (time.process_time), which other programs sharing the machine disturb less
than the wall clock; with one thread and no device they are the same work. "direct torch" is
what a hand-written loop must do at least: the same per-batch tensor operations into running
sums, float64 where accmt sums floats in float64, and nothing to drop padding or synchronise.
Goals: accmt within 1.2x of direct torch, and no slower than torchmetrics.

Memory: each accmt metric fed 10M samples (batches of 1024, the same few batches over and
over), measured by the bytes of the tensors in its state_dict() (all it accumulates) after the
first batch and after the last, and by the growth of the process's peak resident memory over
the run (Linux: VmHWM, reset before each). tests/metrics/test_memory.py checks the same with
every tensor reachable from the metric object. A PerSampleMetric (median
absolute error, a user's metric of the other style) is fed the same way for contrast.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
import torchmetrics
from torch import Tensor
from torchmetrics import classification as tmc
from torchmetrics import text as tmt

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

CLASSES = 10
TOP_K = 5
TOKENS = 4  # tokens per sample (sequence) for Perplexity
VOCABULARY = 16
BATCHES = {32: 2_000, 1024: 400}  # batch size: batches per timed run
REPEATS = 7
MEMORY_SAMPLES = 10_000_000
MEMORY_BATCH = 1024

Batch = tuple[Tensor, ...]


def make_batches(size: int, count: int, generator: torch.Generator) -> dict[str, list[Batch]]:
    """``count`` batches of ``size`` samples of each kind of input."""
    rows = size * count
    scores = torch.randn(rows, CLASSES, generator=generator)
    labels = torch.randint(0, CLASSES, (rows,), generator=generator)
    predictions = torch.randn(rows, generator=generator)
    targets = torch.randn(rows, generator=generator)
    logits = torch.randn(rows, TOKENS, VOCABULARY, generator=generator)
    tokens = torch.randint(0, VOCABULARY, (rows, TOKENS), generator=generator)

    def split(*tensors: Tensor) -> list[Batch]:
        return list(zip(*(tensor.split(size) for tensor in tensors), strict=True))

    return {
        "classes": split(scores, labels),
        "regression": split(predictions, targets),
        "values": split(predictions),
        "tokens": split(logits, tokens),
    }


# --- the same arithmetic, written directly ------------------------------------------------------


def direct_accuracy(batches: list[Batch]) -> float:
    correct, seen = torch.zeros((), dtype=torch.int64), 0
    for scores, labels in batches:
        correct += (scores.argmax(dim=1) == labels).sum()
        seen += labels.shape[0]
    return int(correct) / seen


def direct_top_k(batches: list[Batch]) -> float:
    correct, seen = torch.zeros((), dtype=torch.int64), 0
    for scores, labels in batches:
        correct += (scores.topk(TOP_K, dim=1).indices == labels.unsqueeze(1)).sum()
        seen += labels.shape[0]
    return int(correct) / seen


def direct_class_counts(batches: list[Batch]) -> Tensor:
    """True positives, predictions and references per class."""
    counts = torch.zeros(3, CLASSES, dtype=torch.int64)
    ones = torch.ones(max(len(labels) for _, labels in batches), dtype=torch.int64)
    for scores, labels in batches:
        predicted = scores.argmax(dim=1)
        counts[2].index_add_(0, labels, ones[: labels.shape[0]])
        counts[1].index_add_(0, predicted, ones[: labels.shape[0]])
        counts[0].index_add_(0, labels, (predicted == labels).long())
    return counts.double()


def macro(numerator: Tensor, denominator: Tensor) -> float:
    return float(torch.where(denominator > 0, numerator / denominator.clamp(min=1), 0.0).mean())


def direct_precision(batches: list[Batch]) -> float:
    true_positives, predicted, _ = direct_class_counts(batches)
    return macro(true_positives, predicted)


def direct_recall(batches: list[Batch]) -> float:
    true_positives, _, true = direct_class_counts(batches)
    return macro(true_positives, true)


def direct_f1(batches: list[Batch]) -> float:
    true_positives, predicted, true = direct_class_counts(batches)
    return macro(2 * true_positives, predicted + true)


def direct_error(batches: list[Batch], error: Callable[[Tensor], Tensor]) -> float:
    total, seen = torch.zeros((), dtype=torch.float64), 0
    for predictions, targets in batches:
        total += error(predictions.double() - targets.double()).sum()
        seen += predictions.numel()
    return float(total) / seen


def direct_mse(batches: list[Batch]) -> float:
    return direct_error(batches, Tensor.square)


def direct_mae(batches: list[Batch]) -> float:
    return direct_error(batches, Tensor.abs)


def direct_mean(batches: list[Batch]) -> float:
    total, seen = torch.zeros((), dtype=torch.float64), 0
    for (values,) in batches:
        total += values.sum(dtype=torch.float64)
        seen += values.shape[0]
    return float(total) / seen


def direct_perplexity(batches: list[Batch]) -> float:
    total = torch.zeros((), dtype=torch.float64)
    scored = torch.zeros((), dtype=torch.int64)
    for logits, tokens in batches:
        targets = tokens.reshape(-1)
        nll = F.cross_entropy(logits.reshape(-1, VOCABULARY), targets, reduction="none")
        total += nll.sum(dtype=torch.float64)
        scored += (targets != -100).sum()
    return float(torch.exp(total / scored))


# --- the three sides of each case ---------------------------------------------------------------

# name: (kind of input, accmt metric, direct torch, torchmetrics metric of the same name)
CASES: dict[str, tuple[str, Callable[[], Metric], Callable[[list[Batch]], float], Any]] = {
    "Accuracy": (
        "classes",
        Accuracy,
        direct_accuracy,
        lambda: tmc.MulticlassAccuracy(num_classes=CLASSES, average="micro"),
    ),
    f"Accuracy top_k={TOP_K}": (
        "classes",
        lambda: Accuracy(top_k=TOP_K),
        direct_top_k,
        lambda: tmc.MulticlassAccuracy(num_classes=CLASSES, average="micro", top_k=TOP_K),
    ),
    "Precision macro": (
        "classes",
        lambda: Precision("macro", num_classes=CLASSES),
        direct_precision,
        lambda: tmc.MulticlassPrecision(num_classes=CLASSES, average="macro"),
    ),
    "Recall macro": (
        "classes",
        lambda: Recall("macro", num_classes=CLASSES),
        direct_recall,
        lambda: tmc.MulticlassRecall(num_classes=CLASSES, average="macro"),
    ),
    "F1 macro": (
        "classes",
        lambda: F1("macro", num_classes=CLASSES),
        direct_f1,
        lambda: tmc.MulticlassF1Score(num_classes=CLASSES, average="macro"),
    ),
    "MeanSquaredError": (
        "regression",
        MeanSquaredError,
        direct_mse,
        torchmetrics.MeanSquaredError,
    ),
    "MeanAbsoluteError": (
        "regression",
        MeanAbsoluteError,
        direct_mae,
        torchmetrics.MeanAbsoluteError,
    ),
    "Mean": ("values", Mean, direct_mean, torchmetrics.MeanMetric),
    "Perplexity": ("tokens", lambda: Perplexity(causal=False), direct_perplexity, tmt.Perplexity),
}


def with_accmt(make: Callable[[], Metric], batches: list[Batch]) -> float:
    metric = make()
    for batch in batches:
        metric.add_batch(*batch)
    return next(iter(metric.compute().values()))


def with_torchmetrics(make: Callable[[], Any], batches: list[Batch]) -> float:
    metric = make()
    for batch in batches:
        metric.update(*batch)
    return float(metric.compute())


def interleaved_medians(runs: dict[str, Callable[[], float]]) -> dict[str, tuple[float, float]]:
    """Median CPU seconds of each run and what it returned, the runs taken in turn."""
    seconds: dict[str, list[float]] = {name: [] for name in runs}
    results: dict[str, float] = {}
    for _ in range(REPEATS):
        for name, run in runs.items():
            start = time.process_time()
            results[name] = run()
            seconds[name].append(time.process_time() - start)
    return {name: (statistics.median(seconds[name]), results[name]) for name in runs}


def speed() -> None:
    print(
        f"Time per sample (ns), median of {REPEATS}; CPU, {torch.get_num_threads()} thread; "
        f"{CLASSES} classes, Perplexity: {TOKENS} tokens per sample, vocabulary {VOCABULARY}"
    )
    header = f"  {'metric':<22} {'batch':>5} {'accmt':>9} {'direct':>9} {'torchmetrics':>12}"
    print(f"{header} {'vs direct':>9} {'vs tm':>6}  agree")
    generator = torch.Generator().manual_seed(0)
    for size, count in BATCHES.items():
        inputs = make_batches(size, count, generator)
        for label, (kind, make, direct, make_tm) in CASES.items():
            data = inputs[kind]
            medians = interleaved_medians(
                {
                    "accmt": lambda make=make, data=data: with_accmt(make, data),
                    "direct": lambda direct=direct, data=data: direct(data),
                    "torchmetrics": lambda make_tm=make_tm, data=data: with_torchmetrics(
                        make_tm, data
                    ),
                }
            )
            per_sample = {
                name: median / (size * count) * 1e9 for name, (median, _) in medians.items()
            }
            results = {name: result for name, (_, result) in medians.items()}
            agree = abs(results["accmt"] - results["direct"]) <= 1e-12 * abs(results["direct"])
            # torchmetrics sums in float32.
            agree_tm = abs(results["accmt"] - results["torchmetrics"]) <= 1e-5 * max(
                1.0, abs(results["torchmetrics"])
            )
            print(
                f"  {label:<22} {size:>5} {per_sample['accmt']:9.1f} {per_sample['direct']:9.1f}"
                f" {per_sample['torchmetrics']:12.1f}"
                f" {per_sample['accmt'] / per_sample['direct']:8.2f}x"
                f" {per_sample['accmt'] / per_sample['torchmetrics']:5.2f}x"
                f"  {'yes' if agree else 'NO'}/{'yes' if agree_tm else 'NO'}"
            )


# --- memory -------------------------------------------------------------------------------------


class MedianAbsoluteError(PerSampleMetric):
    """The other style, for contrast: a float per sample, then the median."""

    default_greater_is_better = False

    def per_sample(self, predictions: Tensor, references: Tensor) -> tuple[Tensor, ...]:
        return ((predictions - references).abs(),)

    def reduce(self, *columns: Tensor) -> float:
        return float(columns[0].median())


def state_bytes(metric: Metric) -> int:
    """Bytes of the tensors in the metric's state_dict(): all it accumulates."""
    state = metric.state_dict()
    held = [*(state.get("totals") or ()), *(state.get("columns") or ())]
    return sum(t.numel() * t.element_size() for t in held if isinstance(t, Tensor))


def peak_resident_kib() -> int | None:
    status = Path("/proc/self/status")
    if not status.exists():
        return None
    for line in status.read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return None


def reset_peak() -> None:
    with contextlib.suppress(OSError):  # not Linux, or not allowed: the peak is then cumulative
        Path("/proc/self/clear_refs").write_text("5")


def memory() -> None:
    print(
        f"\nMemory after {MEMORY_SAMPLES:,} samples (batches of {MEMORY_BATCH}): bytes of the "
        "tensors in state_dict(), and growth of the process's peak resident memory"
    )
    print(f"  {'metric':<30} {'after 1 batch':>14} {'after 10M':>12} {'peak RSS growth':>16}")
    generator = torch.Generator().manual_seed(1)
    inputs = make_batches(MEMORY_BATCH, 8, generator)
    cases: dict[str, tuple[str, Callable[[], Metric]]] = {
        label: (kind, make) for label, (kind, make, _, _) in CASES.items()
    }
    cases["MedianAbsoluteError (per sample)"] = ("regression", MedianAbsoluteError)
    batches = MEMORY_SAMPLES // MEMORY_BATCH
    for label, (kind, make) in cases.items():
        pool = inputs[kind]
        metric = make()
        metric.add_batch(*pool[0])
        first = state_bytes(metric)
        reset_peak()
        before = peak_resident_kib()
        for index in range(1, batches):
            metric.add_batch(*pool[index % len(pool)])
        metric.compute()
        after = peak_resident_kib()
        growth = "n/a" if before is None or after is None else f"{(after - before) / 1024:.1f} MiB"
        print(f"  {label:<30} {first:>12} B {state_bytes(metric):>10} B {growth:>16}")


def main() -> None:
    torch.set_num_threads(1)
    speed()
    memory()


if __name__ == "__main__":
    main()
