"""The Metric life cycle: compute, reset, checkpoints, subclasses, and which world it syncs."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
import torch
from torch import Tensor

from accmt_decorators import NoProcessGroupError
from accmt_metrics import (
    F1,
    Accuracy,
    Mean,
    MeanAbsoluteError,
    MeanSquaredError,
    Metric,
    MetricError,
    Perplexity,
    PerSampleMetric,
    Precision,
    Recall,
    SummedMetric,
)

DEFAULTS = [
    (Accuracy(), "accuracy", True),
    (Accuracy(top_k=5), "top5_accuracy", True),
    (Precision(), "precision", True),
    (Recall(), "recall", True),
    (F1(), "f1", True),
    (MeanSquaredError(), "mse", False),
    (MeanAbsoluteError(), "mae", False),
    (Mean(), "mean", False),
    (Perplexity(), "perplexity", False),
]


@pytest.mark.parametrize(("metric", "name", "greater_is_better"), DEFAULTS)
def test_default_names_and_direction(metric: Metric, name: str, greater_is_better: bool) -> None:
    assert (metric.name, metric.greater_is_better, metric.num_samples) == (
        name,
        greater_is_better,
        None,
    )
    renamed = type(metric)(name="other", greater_is_better=not greater_is_better, num_samples=7)
    assert (renamed.name, renamed.greater_is_better, renamed.num_samples) == (
        "other",
        not greater_is_better,
        7,
    )


def test_compute_neither_resets_nor_changes() -> None:
    metric = F1()
    metric.add_batch(torch.tensor([0, 1, 2]), torch.tensor([0, 1, 1]))
    metric.add_batch(torch.tensor([2, 2]), torch.tensor([2, 0]))
    first = metric.compute()
    assert metric.compute() == first
    metric.add_batch(torch.tensor([0]), torch.tensor([0]))
    grown = metric.compute()
    assert grown != first
    metric.reset()
    with pytest.raises(MetricError, match="before any sample"):
        metric.compute()
    metric.add_batch(torch.tensor([0]), torch.tensor([0]))
    assert metric.compute() == {"f1": 1.0}


def test_a_half_finished_running_mean_survives_a_checkpoint(tmp_path: Path) -> None:
    losses = torch.rand(10, dtype=torch.float64)
    uninterrupted = Mean(name="loss")
    for loss in losses:
        uninterrupted.update(loss, weight=4)
    first = Mean(name="loss")
    for loss in losses[:6]:
        first.update(loss, weight=4)
    torch.save(first.state_dict(), tmp_path / "metric.pt")
    resumed = Mean(name="loss")
    resumed.load_state_dict(torch.load(tmp_path / "metric.pt", weights_only=True))
    for loss in losses[6:]:
        resumed.update(loss, weight=4)
    assert resumed.compute() == uninterrupted.compute()


def test_a_checkpoint_keeps_the_place_of_the_next_batch(tmp_path: Path) -> None:
    uninterrupted = Accuracy(num_samples=6)
    first = Accuracy(num_samples=6)
    batches = [
        (torch.tensor([1, 0]), torch.tensor([1, 1]), None),
        (torch.tensor([1, 1, 1]), torch.tensor([1, 1, 0]), torch.tensor([True, True, False])),
        (torch.tensor([2, 2, 0]), torch.tensor([2, 2, 2]), None),  # the last two are padding
    ]
    for predictions, references, mask in batches:
        uninterrupted.add_batch(predictions, references, mask=mask)
    for predictions, references, mask in batches[:2]:
        first.add_batch(predictions, references, mask=mask)
    torch.save(first.state_dict(), tmp_path / "metric.pt")
    restored = Accuracy(num_samples=6)
    restored.load_state_dict(torch.load(tmp_path / "metric.pt", weights_only=True))
    predictions, references, mask = batches[2]
    restored.add_batch(predictions, references, mask=mask)
    assert restored.compute() == uninterrupted.compute() == {"accuracy": 4 / 5}
    assert restored.state_dict()["added"] == 8
    assert (restored.state_dict()["unplaced"], restored.state_dict()["masked"]) == (2, 1)


def test_loading_another_metric_state_raises() -> None:
    mean = Mean()
    mean.update(1.0)
    with pytest.raises(MetricError, match=r"Accuracy\('accuracy'\): .*state of a Mean"):
        Accuracy().load_state_dict(mean.state_dict())
    with pytest.raises(MetricError, match="did not write"):
        Accuracy().load_state_dict({"batches": []})
    state = mean.state_dict()
    state["totals"] = "1.0"
    with pytest.raises(MetricError, match=r"sums that state_dict\(\) did not write"):
        Mean().load_state_dict(state)
    state = mean.state_dict()
    state["masked"] = -1
    with pytest.raises(MetricError, match="bad sample counts"):
        Mean().load_state_dict(state)
    largest = LargestError()
    largest.add_batch(torch.ones(3), torch.zeros(3))
    state = largest.state_dict()
    state["kept_sizes"] = [2]
    with pytest.raises(MetricError, match="do not fit"):
        LargestError().load_state_dict(state)


class LargestError(PerSampleMetric):
    """A user's own metric that needs the samples: a per-sample column of two values."""

    default_name = "largest_error"
    default_greater_is_better = False

    def per_sample(self, predictions: Tensor, references: Tensor) -> tuple[Tensor, ...]:
        return (torch.stack([predictions - references, references], dim=1),)

    def reduce(self, *columns: Tensor) -> dict[str, float]:
        (pairs,) = columns
        return {"largest_error": float(pairs[:, 0].abs().max()), "count": float(len(pairs))}


def test_a_per_sample_subclass_implements_only_the_math(tmp_path: Path) -> None:
    metric = LargestError(num_samples=3)
    metric.add_batch(torch.tensor([1.0, 5.0]), torch.tensor([1.5, 2.0]))
    metric.add_batch(torch.tensor([0.0, 9.0]), torch.tensor([0.0, 0.0]))  # the 9 is padding
    assert metric.compute() == {"largest_error": 3.0, "count": 3.0}
    torch.save(metric.state_dict(), tmp_path / "metric.pt")
    restored = LargestError(num_samples=3)
    restored.load_state_dict(torch.load(tmp_path / "metric.pt", weights_only=True))
    assert restored.compute() == metric.compute()
    unpadded = LargestError()
    unpadded.add_batch(torch.ones(2), torch.ones(2))
    with pytest.raises(MetricError, match="same per-sample shape"):
        unpadded.add_batch(torch.ones(2, 2), torch.ones(2, 2))
    assert repr(metric) == "LargestError('largest_error')"


class MeanRelativeError(SummedMetric):
    """A user's own metric from sums: a float64 sum and an exact count."""

    default_name = "mre"
    default_greater_is_better = False

    def statistics(self, predictions: Tensor, references: Tensor) -> Sequence[Tensor | int | float]:
        errors = ((predictions - references) / references).abs()
        return errors.sum(dtype=torch.float64), errors.numel()

    def result(self, *totals: Tensor) -> float:
        total, count = totals
        return float(total) / int(count)


def test_a_summed_subclass_implements_only_the_math() -> None:
    metric = MeanRelativeError(num_samples=3)
    metric.add_batch(torch.tensor([1.0, 3.0]), torch.tensor([2.0, 2.0]))
    metric.add_batch(torch.tensor([4.0, 9.0]), torch.tensor([2.0, 1.0]))  # the 9 is padding
    assert metric.compute() == {"mre": pytest.approx((0.5 + 0.5 + 1.0) / 3, rel=1e-15)}
    # The sums are the metric's whole state: two numbers, whatever the number of samples.
    assert [type(total) for total in metric.state_dict()["totals"]] == [Tensor, int]


class Float32Sum(SummedMetric):
    def statistics(self, predictions: Tensor, references: Tensor) -> Sequence[Tensor | int | float]:
        return (predictions.sum(),)

    def result(self, *totals: Tensor) -> float:
        return float(totals[0])


class ChangingShape(Float32Sum):
    def statistics(self, predictions: Tensor, references: Tensor) -> Sequence[Tensor | int | float]:
        return (predictions.double().sum(dim=0),)


def test_summed_statistics_must_be_exact_and_keep_their_shape() -> None:
    with pytest.raises(MetricError, match=r"value 0 is torch.float32: sum floats in float64"):
        Float32Sum().add_batch(torch.ones(3), torch.ones(3))
    integers = Float32Sum()
    integers.add_batch(torch.tensor([2**40, 2**40 + 1]), torch.ones(2))  # int64, exact
    integers.add_batch(torch.tensor([1]), torch.ones(1))
    assert integers.state_dict()["totals"][0].dtype == torch.int64
    assert int(integers.state_dict()["totals"][0]) == 2**41 + 2
    changing = ChangingShape()
    changing.add_batch(torch.ones(2, 3), torch.ones(2))
    with pytest.raises(MetricError, match=r"changed from a torch.float64 tensor of shape \(3,\)"):
        changing.add_batch(torch.ones(2, 4), torch.ones(2))


def test_several_processes_without_a_group_raise_unless_sync_is_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    metric = Accuracy()
    metric.add_batch(torch.tensor([1, 0]), torch.tensor([1, 1]))
    with pytest.raises(NoProcessGroupError, match=r"torch\.distributed is not initialised"):
        metric.compute()
    local = Accuracy(sync=False)
    local.add_batch(torch.tensor([1, 0]), torch.tensor([1, 1]))
    assert local.compute() == {"accuracy": 0.5}


def test_importing_leaves_accelerate_and_torchmetrics_out() -> None:
    code = (
        "import sys, accmt_metrics\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "{'accelerate', 'torchmetrics', 'sklearn'}))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
