"""accmt 1.x's HyperParameterSearch runs unchanged through the meta-package: its snippet, a list
of validation datasets and a best_metric_fn that reads 1.x's names."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import optuna
import pytest
import torch
from accelerate.state import AcceleratorState
from sklearn.datasets import load_digits
from torch.utils.data import TensorDataset

from accmt import Accuracy, HyperParameterSearch
from accmt._one_x._search import OneXMetrics
from accmt_search import EvaluationMetrics
from tests.search._data import DigitsMLP, digits


@pytest.fixture(autouse=True)
def fresh_accelerate_state() -> Iterator[None]:
    yield
    AcceleratorState._reset_state(reset_partial_state=True)


def test_the_1x_snippet_runs_unchanged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from accmt import AcceleratorModule, HyperParameterSearch
    from accmt.hp_search import HyperParameterSearch as FromTheOneXModule

    assert FromTheOneXModule is HyperParameterSearch

    images, labels = load_digits(return_X_y=True)
    features = torch.tensor(images[:300], dtype=torch.float32) / 16
    targets = torch.tensor(labels[:300])
    train_dataset = TensorDataset(features[:240], targets[:240])
    val_dataset = TensorDataset(features[240:], targets[240:])

    class Module(AcceleratorModule):
        def __init__(self) -> None:
            self.model = torch.nn.Linear(64, 10)

        def training_step(self, batch: Any) -> torch.Tensor:
            return torch.nn.functional.cross_entropy(self.model(batch[0]), batch[1])

        def validation_step(self, key: str, batch: Any) -> torch.Tensor:
            return torch.nn.functional.cross_entropy(self.model(batch[0]), batch[1])

    def get_module_fn() -> Module:
        return Module()

    monkeypatch.chdir(tmp_path)
    trainer_kwargs: dict[str, Any] = {}
    # accmt 1.x's documented use, as written there.
    search = HyperParameterSearch(
        get_module_fn, train_dataset, val_dataset, metrics=None, **trainer_kwargs
    )
    search.set_parameters(
        train_batch_size=[16, 32, 64],
        epochs=3,
        learning_rate=[1e-4, 1e-2],
        weight_decay=[0.0, 0.1],
        scheduler={"linear": "LinearWithWarmup", "cosine": "CosineWithWarmup"},
        warmup_ratio=0.1,
        optimizer="AdamW",
    )
    search.optimize(best_metric_fn=None, direction="minimize", n_trials=10)

    study = optuna.load_study(
        study_name="accmt-search", storage=f"sqlite:///{tmp_path}/hp_search/study.db"
    )
    finished = [t for t in study.trials if t.state.is_finished()]
    assert len(finished) == 10
    best = study.best_trial
    assert set(best.params) == {"train_batch_size", "learning_rate", "weight_decay", "scheduler"}
    # The default objective is the validation loss, as 1.x's metrics["0"]["valid_loss"].
    assert 0 < best.value < 2.5
    assert (tmp_path / "hp_search" / "best_hps.yaml").read_text().startswith("hps:\n")


def test_best_metric_fn_reads_1x_names_and_a_list_of_validation_sets(
    tmp_path: Path,
) -> None:
    train, valid = digits()
    seen: list[EvaluationMetrics] = []

    def objective(metrics: EvaluationMetrics) -> float:
        seen.append(metrics)
        return metrics["0"]["valid_loss"]

    found = HyperParameterSearch(
        DigitsMLP, train, [valid, valid], metrics=[Accuracy()], output_dir=tmp_path, log_with=None
    )
    found.set_parameters(epochs=1, train_batch_size=64, learning_rate=[1e-3, 1e-2])
    result = found.optimize(objective, n_trials=1, plots=False)
    assert set(seen[-1]) == {"0", "1"}
    assert set(seen[-1]["1"]) == {"loss", "accuracy"}
    assert result.value == seen[-1]["0"]["loss"]


def test_evaluation_metrics_read_1x_names() -> None:
    metrics = OneXMetrics({"validation": {"loss": 0.5, "accuracy": 0.9}})
    assert metrics["validation"]["accuracy"] == 0.9
    assert metrics["0"]["valid_loss"] == 0.5  # accmt 1.x's default objective
    assert metrics == {"validation": {"loss": 0.5, "accuracy": 0.9}}
    with pytest.raises(KeyError):
        metrics["1"]
    with pytest.raises(KeyError):
        metrics["0"]["valid_accuracy"]


def test_a_1x_objective_is_checked_and_named_as_a_2x_one() -> None:
    from accmt._one_x._search import _one_x_objective
    from accmt_search import MetricNameError
    from accmt_search._objective import check_objective

    reported = {"validation": ["accuracy", "loss"]}
    accuracy = _one_x_objective(lambda metrics: metrics["0"]["accuracy"])
    assert check_objective(accuracy, reported) == "validation accuracy"
    assert check_objective(_one_x_objective(lambda m: m["0"]["valid_loss"]), reported) == (
        "validation loss"
    )
    with pytest.raises(MetricNameError, match=r"metrics\['validation'\]\['acc'\].*'accuracy'"):
        check_objective(_one_x_objective(lambda metrics: metrics["0"]["acc"]), reported)
