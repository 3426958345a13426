"""accmt 1.x's custom metrics, written as 1.x's README and tests write them, on one process.

The same metrics on 2 real processes: tests/distributed/test_legacy_metrics.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

import accmt_metrics
from accmt import AcceleratorModule, HyperParameters, Trainer
from accmt.metrics import Accuracy as BuiltInAccuracy
from accmt.metrics import Metric, MetricBatch, MetricError, MetricParallel


class Accuracy(Metric):
    """accmt 1.x's own test metric, unchanged."""

    def compute(self, predictions, references):  # type: ignore[no-untyped-def]
        return {"accuracy": (predictions == references).sum() / predictions.shape[0]}


class MeanError(MetricBatch):
    def compute(self, predictions, references):  # type: ignore[no-untyped-def]
        return {"mean_error": (predictions - references).abs().mean()}


class Weighted(Metric):
    """Three arguments, one of them a dict, and a numpy value: all 1.x allowed."""

    seen: list[Any]

    def compute(self, scores, labels, weights):  # type: ignore[no-untyped-def]
        self.seen = [scores, labels, weights]
        hits = (scores["logits"].argmax(-1) == labels).double()
        return {
            "weighted_accuracy": float((hits * weights).sum() / weights.sum()),
            "count": np.int64(labels.shape[0]),
        }


def batches(size: int = 50, batch: int = 8) -> list[tuple[torch.Tensor, ...]]:
    generator = torch.Generator().manual_seed(3)
    logits = torch.randn(size, 4, generator=generator, dtype=torch.float64)
    labels = torch.randint(0, 4, (size,), generator=generator)
    weights = torch.rand(size, generator=generator, dtype=torch.float64)
    return [
        (logits[i : i + batch], labels[i : i + batch], weights[i : i + batch])
        for i in range(0, size, batch)
    ]


def everything() -> tuple[torch.Tensor, ...]:
    return tuple(torch.cat(parts) for parts in zip(*batches(), strict=True))


def test_a_1x_metric_computes_over_every_batch_added() -> None:
    metric = Accuracy("accuracy")
    for logits, labels, _ in batches():
        metric.add_batch(logits.argmax(-1), labels)
    logits, labels, _ = everything()
    expected = ((logits.argmax(-1) == labels).sum() / labels.shape[0]).item()
    assert metric.compute() == {"accuracy": expected}
    assert metric.compute() == {"accuracy": expected}  # compute does not reset
    # Called with arguments, compute is the 1.x math itself.
    assert metric.compute(logits.argmax(-1), labels) == {"accuracy": expected}
    metric.clear()
    with pytest.raises(MetricError, match="before any sample"):
        metric.compute()


def test_it_is_a_2x_metric_the_trainer_can_drive() -> None:
    metric = Accuracy("accuracy", greater_is_better=True)
    assert isinstance(metric, accmt_metrics.Metric)
    assert (metric.name, metric.main_metric, metric.greater_is_better) == (
        "accuracy",
        "accuracy",
        True,
    )
    # main_metric names the key validation_step returns and rules compare (1.x's meaning).
    lower = Accuracy("my_metrics", greater_is_better=False, main_metric="error")
    assert (lower.name, lower.main_metric, lower.greater_is_better) == ("error", "error", False)


def test_dict_and_several_arguments_are_concatenated_and_cast() -> None:
    metric = Weighted("weighted")
    for logits, labels, weights in batches():
        metric.add_batch({"logits": logits}, labels, weights)
    logits, labels, weights = everything()
    hits = (logits.float().argmax(-1) == labels).double()
    expected = float((hits * weights.float().double()).sum() / weights.float().double().sum())
    result = metric.compute()
    assert result == {"weighted_accuracy": pytest.approx(expected, rel=1e-6), "count": 50.0}
    scores, seen_labels, seen_weights = metric.seen
    assert scores["logits"].dtype == torch.float32  # 1.x's default cast
    assert torch.equal(scores["logits"], logits.float())
    assert torch.equal(seen_labels, labels)
    assert seen_weights.dtype == torch.float32


def test_cast_none_keeps_the_dtype() -> None:
    metric = Weighted("weighted", cast=None)
    for logits, labels, weights in batches():
        metric.add_batch({"logits": logits}, labels, weights)
    metric.compute()
    assert metric.seen[0]["logits"].dtype == torch.float64


def test_one_argument_is_one_argument() -> None:
    class MeanValue(Metric):
        def compute(self, values):  # type: ignore[no-untyped-def]
            return {"mean_value": values.mean()}

    metric = MeanValue("mean_value")
    metric.add_batch(torch.tensor([1.0, 2.0]))
    metric.add_batch(torch.tensor([6.0]))
    assert metric.compute() == {"mean_value": 3.0}


def test_metric_batch_averages_the_batches_results_as_1x_did() -> None:
    metric = MeanError("mean_error")
    for logits, _, weights in batches():
        metric.add_batch(logits[:, 0], weights)
    per_batch = [
        (logits[:, 0].float() - weights.float()).abs().mean().item()
        for logits, _, weights in batches()
    ]
    assert metric.compute() == {"mean_error": pytest.approx(sum(per_batch) / len(per_batch))}
    # It differs from the mean over samples: the last batch (2 samples) weighs as much as any.
    logits, _, weights = everything()
    overall = (logits[:, 0].float() - weights.float()).abs().mean().item()
    assert metric.compute()["mean_error"] != pytest.approx(overall)


def test_metric_parallel_is_an_exact_metric() -> None:
    class ParallelAccuracy(MetricParallel):
        def compute(self, predictions, references):  # type: ignore[no-untyped-def]
            return {"accuracy": (predictions == references).sum() / predictions.shape[0]}

    metric, reference = ParallelAccuracy("accuracy"), Accuracy("accuracy")
    for logits, labels, _ in batches():
        metric.add_batch(logits.argmax(-1), labels)
        reference.add_batch(logits.argmax(-1), labels)
    assert metric.compute() == reference.compute()


@pytest.mark.parametrize(
    ("before", "arguments", "match"),
    [
        ([(torch.ones(2), torch.ones(2))], (torch.ones(2), {"x": torch.ones(2)}), "changed form"),
        ([], (torch.ones(2), torch.ones(3)), "one row per sample"),
        ([], (torch.ones(2), [1, 2]), "tensors or dicts of tensors"),
        ([], (torch.tensor(1.0),), "one row per sample"),
    ],
)
def test_bad_arguments_are_errors_naming_the_metric(
    before: list[tuple[Any, ...]], arguments: tuple[Any, ...], match: str
) -> None:
    metric = Accuracy("accuracy")
    for earlier in before:
        metric.add_batch(*earlier)
    with pytest.raises(MetricError, match=match) as caught:
        metric.add_batch(*arguments)
    assert "Accuracy('accuracy')" in str(caught.value)


def test_a_metric_without_compute_says_what_to_override() -> None:
    metric = Metric("nothing")
    metric.add_batch(torch.ones(2), torch.ones(2))
    with pytest.raises(NotImplementedError, match=r"compute\(predictions, references\)"):
        metric.compute()


def test_the_2x_hooks_still_work_on_the_1x_base() -> None:
    class LargestError(Metric):
        default_name = "largest_error"

        def per_sample(self, predictions: torch.Tensor, references: torch.Tensor) -> Any:
            return ((predictions - references).abs(),)

        def reduce(self, *columns: torch.Tensor) -> float:
            return float(columns[0].max())

    metric = LargestError()
    metric.add_batch(torch.tensor([1.0, 5.0]), torch.tensor([1.5, 1.0]))
    assert metric.compute() == {"largest_error": 4.0}


def in_batches(model: torch.nn.Module, features: torch.Tensor, size: int) -> torch.Tensor:
    """``model`` over ``features`` in consecutive batches of ``size`` rows, as validation runs
    it: the same shapes give the same kernels, so the same outputs bit for bit."""
    with torch.no_grad():
        return torch.cat([model(features[i : i + size]) for i in range(0, len(features), size)])


class Classifier(AcceleratorModule):
    def __init__(self) -> None:
        torch.manual_seed(0)
        self.model = torch.nn.Linear(4, 3)

    def training_step(self, batch: Any) -> torch.Tensor:
        features, labels = batch
        return torch.nn.functional.cross_entropy(self.model(features), labels)

    def validation_step(self, key: str, batch: Any) -> dict[str, Any]:
        features, labels = batch
        logits = self.model(features)
        return {
            "loss": torch.nn.functional.cross_entropy(logits, labels),
            "accuracy": (logits.argmax(-1), labels),
        }


def test_the_trainer_reports_the_1x_math_over_the_whole_validation_set(tmp_path: Path) -> None:
    generator = torch.Generator().manual_seed(0)
    data = TensorDataset(
        torch.randn(40, 4, generator=generator), torch.randint(0, 3, (40,), generator=generator)
    )
    hps = HyperParameters(epochs=1, batch_size=6, optimizer_kwargs={"lr": 0.1})
    options: dict[str, Any] = {
        "log_with": None,
        "checkpoint_every": None,
        "progress_bar": False,
        "seed": 0,
    }
    module = Classifier()
    trainer = Trainer(hps, tmp_path, metrics=[Accuracy("accuracy")], **options)
    found = trainer.fit(module, data, data).additional_metrics["validation"]["accuracy"]
    features, labels = data.tensors
    # In validation's batches of 6: the same logits as validation's to the bit (one forward
    # over the 40 rows picks other MKL/oneDNN kernels, whose last bits could flip a near tie).
    predictions = in_batches(module.model, features, 6).argmax(-1)
    # The 1.x math (a float32 ratio) over the 40 samples, as one call.
    assert found == float((predictions == labels).sum() / 40)
    built_in = BuiltInAccuracy()
    for batch_features, batch_labels in DataLoader(data, batch_size=6):
        built_in.add_batch(module.model(batch_features).argmax(-1), batch_labels)
    assert found == pytest.approx(built_in.compute()["accuracy"])


class Positives(Metric):
    """One argument, not in a tuple."""

    def compute(self, scores):  # type: ignore[no-untyped-def]
        return {"positives": (scores > 0).sum()}


class OneXModule(AcceleratorModule):
    """As 1.x's README writes one: validation_step(self, batch), and metric arguments that are
    one tensor, or three with a dict among them."""

    def __init__(self) -> None:
        torch.manual_seed(0)
        self.model = torch.nn.Linear(4, 4)

    def training_step(self, batch):  # type: ignore[no-untyped-def]
        features, labels, _ = batch
        return torch.nn.functional.cross_entropy(self.model(features), labels)

    def validation_step(self, batch):  # type: ignore[no-untyped-def]
        features, labels, weights = batch
        logits = self.model(features)
        return {
            "loss": torch.nn.functional.cross_entropy(logits, labels),
            "weighted_accuracy": ({"logits": logits}, labels, weights),
            "positives": logits[:, 0],
        }


def test_a_1x_module_with_metrics_of_one_and_three_arguments(tmp_path: Path) -> None:
    logits, labels, weights = everything()
    data = TensorDataset(logits.float(), labels, weights)
    hps = HyperParameters(epochs=1, batch_size=8, optimizer_kwargs={"lr": 0.1})
    metrics = [Weighted("weighted_accuracy"), Positives("positives")]
    module = OneXModule()
    trainer = Trainer(
        hps, tmp_path, metrics=metrics, log_with=None, progress_bar=False, checkpoint_every=None
    )
    found = trainer.fit(module, data, data).additional_metrics["validation"]
    # In validation's batches of 8, so that the signs and argmaxes counted below are
    # validation's own (see in_batches).
    out = in_batches(module.model, logits.float(), 8)
    hits = (out.argmax(-1) == labels).double()
    assert found["weighted_accuracy"] == pytest.approx(
        float((hits * weights).sum() / weights.sum())
    )
    assert found["count"] == 50.0
    assert found["positives"] == float((out[:, 0] > 0).sum())
