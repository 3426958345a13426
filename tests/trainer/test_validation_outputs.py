"""What the Trainer takes for validation: one metric instead of a list, and metric arguments
that are not a pair (a metric's ``add_batch`` may take any number)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from torch import Tensor

from accmt_metrics import Accuracy, PerSampleMetric
from accmt_trainer import HyperParameters, StepOutputError, Trainer, TrainerConfigError

from .conftest import Classifier, blobs

HPS = HyperParameters(epochs=1, batch_size=8, optimizer="AdamW", optimizer_kwargs={"lr": 0.05})


def trainer(tmp_path: Path, **options: Any) -> Trainer:
    options.setdefault("log_with", None)
    options.setdefault("progress_bar", False)
    options.setdefault("checkpoint_every", None)
    return Trainer(HPS, tmp_path / "run", **options)


def by_hand(module: Classifier, data: Any) -> float:
    features, labels = data.tensors
    size = HPS.val_batch_size
    with torch.no_grad():
        # In validation's batches, so the logits (and their argmax) are validation's to the bit:
        # one forward over the whole set picks other MKL/oneDNN kernels, whose last bits could
        # turn a near tie the other way.
        predictions = torch.cat(
            [module.model(features[i : i + size]).argmax(-1) for i in range(0, len(labels), size)]
        )
    return float((predictions == labels).float().mean())


# ----------------------------------------------------------------------- one metric


def test_metrics_may_be_one_metric(tmp_path: Path) -> None:
    module, val = Classifier(), blobs(24, seed=1)
    state = trainer(tmp_path, metrics=Accuracy()).fit(module, blobs(16), val)
    assert state.additional_metrics["validation"]["accuracy"] == pytest.approx(by_hand(module, val))


def test_a_dict_of_metrics_may_give_one_metric_per_set(tmp_path: Path) -> None:
    module, a, b = Classifier(), blobs(24, seed=1), blobs(16, seed=2)
    state = trainer(tmp_path, metrics={"a": Accuracy(), "b": [Accuracy()]}).fit(
        module, blobs(16), {"a": a, "b": b}
    )
    assert state.additional_metrics["a"]["accuracy"] == pytest.approx(by_hand(module, a))
    assert state.additional_metrics["b"]["accuracy"] == pytest.approx(by_hand(module, b))


@pytest.mark.parametrize("metrics", [3, "accuracy", {"validation": 3}])
def test_metrics_that_are_not_metrics_are_named_before_training(
    tmp_path: Path, metrics: Any
) -> None:
    with pytest.raises(TrainerConfigError, match=r"Trainer\(metrics=\.\.\.\): expected"):
        trainer(tmp_path, metrics=metrics).fit(Classifier(), blobs(16), blobs(8, seed=1))


# -------------------------------------------------------- metric arguments not a pair


class MeanCorrect(PerSampleMetric):
    """A metric of one argument: a bool per sample."""

    default_name = "correct"

    def add_batch(self, correct: Tensor) -> None:  # type: ignore[override]
        super().add_batch(correct, correct)

    def per_sample(self, predictions: Tensor, references: Tensor) -> tuple[Tensor, ...]:
        return (predictions.float(),)

    def reduce(self, *columns: Tensor) -> float:
        return float(columns[0].mean())


class WeightedAccuracy(PerSampleMetric):
    """A metric of three arguments."""

    default_name = "weighted"

    def add_batch(self, predictions: Tensor, references: Tensor, weights: Tensor) -> None:  # type: ignore[override]
        self._weights = weights
        super().add_batch(predictions, references)

    def per_sample(self, predictions: Tensor, references: Tensor) -> tuple[Tensor, ...]:
        return ((predictions == references).float() * self._weights, self._weights)

    def reduce(self, *columns: Tensor) -> float:
        return float(columns[0].sum() / columns[1].sum())


class Shapes(Classifier):
    def validation_step(self, key: str, batch: Any) -> dict[str, Any]:
        features, labels = batch
        predictions = self.model(features).argmax(-1)
        return {
            "correct": predictions == labels,  # one argument, not in a tuple
            "weighted": (predictions, labels, torch.ones(len(labels))),  # three
            "accuracy": (predictions, labels),
            "loss": torch.nn.functional.cross_entropy(self.model(features), labels),
        }


def test_a_metric_s_value_is_its_one_argument_or_the_tuple_of_its_arguments(
    tmp_path: Path,
) -> None:
    module, val = Shapes(), blobs(24, seed=1)
    metrics = [MeanCorrect(), WeightedAccuracy(), Accuracy()]
    state = trainer(tmp_path, metrics=metrics).fit(module, blobs(16), val)
    results = state.additional_metrics["validation"]
    expected = by_hand(module, val)
    del results["loss"]
    assert results == pytest.approx(
        {"correct": expected, "weighted": expected, "accuracy": expected}
    )


class OneTensor(Classifier):
    def validation_step(self, key: str, batch: Any) -> dict[str, Any]:
        features, _ = batch
        return {"accuracy": self.model(features).argmax(-1)}


def test_too_few_arguments_for_a_metric_are_named_before_training(tmp_path: Path) -> None:
    with pytest.raises(
        StepOutputError,
        match=r"returned 'accuracy': 1 argument\(s\) \(Tensor\), "
        r"but Accuracy.add_batch takes \(predictions",
    ):
        trainer(tmp_path, metrics=[Accuracy()]).fit(OneTensor(), blobs(16), blobs(8, seed=1))


def test_a_name_that_is_no_metric_is_still_named(tmp_path: Path) -> None:
    with pytest.raises(TrainerConfigError, match=r"returned 'accuracy', but validation set"):
        trainer(tmp_path, metrics=[MeanCorrect()]).fit(Classifier(), blobs(16), blobs(8, seed=1))


class OneArgument(Classifier):
    def validation_step(self, batch: Any) -> dict[str, Any]:  # type: ignore[override]
        return super().validation_step("validation", batch)


def test_validation_step_must_take_the_key_and_the_batch(tmp_path: Path) -> None:
    run = trainer(tmp_path)
    with pytest.raises(
        TrainerConfigError,
        match=r"OneArgument.validation_step must take \(key, batch\)",
    ):
        run.fit(OneArgument(), blobs(16), blobs(8, seed=1))
    assert run.state.global_step == 0
