"""What accmt 1.x programs give the Trainer for validation: one metric instead of a list, metric
arguments that are not a pair, and ``validation_step(self, batch)`` without the set's key."""

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
    with torch.no_grad():
        return float((module.model(features).argmax(-1) == labels).float().mean())


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
    assert results == pytest.approx({"correct": expected, "weighted": expected,
                                     "accuracy": expected})  # fmt: skip


class OneTensor(Classifier):
    def validation_step(self, key: str, batch: Any) -> dict[str, Any]:
        features, _ = batch
        return {"accuracy": self.model(features).argmax(-1)}


def test_too_few_arguments_for_a_metric_are_named_before_training(tmp_path: Path) -> None:
    with pytest.raises(StepOutputError, match=r"returned 'accuracy': 1 argument\(s\) \(Tensor\), "
                       r"but Accuracy.add_batch takes \(predictions"):  # fmt: skip
        trainer(tmp_path, metrics=[Accuracy()]).fit(OneTensor(), blobs(16), blobs(8, seed=1))


def test_a_name_that_is_no_metric_is_still_named(tmp_path: Path) -> None:
    with pytest.raises(TrainerConfigError, match=r"returned 'accuracy', but validation set"):
        trainer(tmp_path, metrics=[MeanCorrect()]).fit(Classifier(), blobs(16), blobs(8, seed=1))


# ------------------------------------------------------------ validation_step(batch)


class NoKey(Classifier):
    def validation_step(self, batch: Any) -> dict[str, Any]:  # type: ignore[override]
        return super().validation_step("validation", batch)


class KeyWithDefault(Classifier):
    def __init__(self) -> None:
        super().__init__()
        self.keys: set[str] = set()

    def validation_step(self, key: str, batch: Any = None) -> dict[str, Any]:
        self.keys.add(key)
        return super().validation_step(key, batch)


@pytest.mark.parametrize("as_dict", [False, True])
def test_validation_step_without_a_key_serves_one_set(tmp_path: Path, as_dict: bool) -> None:
    module, val = NoKey(), blobs(24, seed=1)
    state = trainer(tmp_path, metrics=[Accuracy()]).fit(
        module, blobs(16), {"only": val} if as_dict else val
    )
    name = "only" if as_dict else "validation"
    assert state.additional_metrics[name]["accuracy"] == pytest.approx(by_hand(module, val))


def test_validation_step_with_a_key_still_gets_it(tmp_path: Path) -> None:
    module = KeyWithDefault()
    trainer(tmp_path, metrics=[Accuracy()]).fit(
        module, blobs(16), {"a": blobs(8, seed=1), "b": blobs(8, seed=2)}
    )
    assert module.keys == {"a", "b"}


def test_validation_step_without_a_key_and_several_sets_is_named_before_training(
    tmp_path: Path,
) -> None:
    run = trainer(tmp_path)
    with pytest.raises(TrainerConfigError, match=r"NoKey.validation_step\(batch\) takes no key, "
                       r"but there are 2 validation sets \['a', 'b'\]"):  # fmt: skip
        run.fit(NoKey(), blobs(16), {"a": blobs(8, seed=1), "b": blobs(8, seed=2)})
    assert run.state.global_step == 0


def test_an_error_names_the_call_without_a_key(tmp_path: Path) -> None:
    class Bad(NoKey):
        def validation_step(self, batch: Any) -> Any:  # type: ignore[override]
            return "loss"

    with pytest.raises(StepOutputError, match=r"Bad.validation_step\(batch\) returned str"):
        trainer(tmp_path).fit(Bad(), blobs(16), blobs(8, seed=1))
