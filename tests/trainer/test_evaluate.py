"""Trainer.evaluate on one process: what it runs, on which weights, and what it refuses.
(On several processes: tests/distributed/test_inference.py.)"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils.data import IterableDataset

from accmt_metrics import Accuracy
from accmt_trainer import HyperParameters, Trainer, TrainerConfigError

from .conftest import Classifier, blobs


def trainer(folder: Path, **options: Any) -> Trainer:
    hps = HyperParameters.from_dict(
        {"epochs": 3, "batch_size": 8, "optimizer_kwargs": {"lr": 0.05}}
    )
    options = {"metrics": [Accuracy()], "log_with": None, "progress_bar": False, **options}
    return Trainer(hps, folder, **options)


def saved(folder: Path) -> dict[str, Any]:
    state = json.loads((folder / "state.json").read_text())
    values: dict[str, Any] = state["additional_metrics"]
    return values


def test_the_best_models_weights_give_the_metrics_they_were_saved_with(tmp_path: Path) -> None:
    run = trainer(tmp_path / "run", evaluate_every_n_steps=3)
    run.register_model_saving("best_valid_loss")
    run.register_model_saving("accuracy")
    module = Classifier()
    run.fit(module, blobs(96), blobs(37, seed=1))
    for rule in ("best_valid_loss", "accuracy"):
        expected = saved(tmp_path / "run" / rule)["validation"]
        found = run.evaluate(module, {"validation": blobs(37, seed=1)}, weights=rule)
        assert found["validation"] == pytest.approx(expected, rel=1e-12), rule
    # The weights evaluated stay in the module: now the accuracy rule's best model's.
    kept = run.evaluate(module, blobs(37, seed=1))
    assert kept == pytest.approx(saved(tmp_path / "run" / "accuracy")["validation"], rel=1e-12)


def test_weights_may_be_a_checkpoint_or_a_saved_folder(tmp_path: Path) -> None:
    run = trainer(tmp_path / "run")
    module = Classifier()
    run.fit(module, blobs(64), blobs(20, seed=1))
    first = tmp_path / "run" / "checkpoints" / "checkpoint_000001"
    from_checkpoint = run.evaluate(module, blobs(20, seed=1), weights=first)
    fresh = Classifier()  # the weights before training: far worse than after one epoch
    before = run.evaluate(fresh, blobs(20, seed=1))
    after_one = run.evaluate(fresh, blobs(20, seed=1), weights=str(first))
    assert after_one == from_checkpoint
    assert after_one["loss"] < before["loss"]
    by_folder = run.evaluate(fresh, blobs(20, seed=1), weights=tmp_path / "run" / "best_valid_loss")
    assert by_folder == run.evaluate(module, blobs(20, seed=1), weights="best_valid_loss")


class WithTestStep(Classifier):
    def test_step(self, key: str, batch: Any) -> dict[str, Any]:
        _, labels = batch
        return {"accuracy": (torch.zeros_like(labels), labels)}


def test_test_step_is_preferred_and_a_dict_names_the_sets(tmp_path: Path) -> None:
    data = blobs(30)
    share_of_zeros = (data.tensors[1] == 0).double().mean().item()
    results = trainer(tmp_path).evaluate(WithTestStep(), {"x": data, "y": blobs(11, seed=3)})
    assert set(results) == {"x", "y"}
    assert results["x"] == {"accuracy": pytest.approx(share_of_zeros, rel=1e-12)}
    # Without test_step, validation_step runs, with the metrics given rather than the Trainer's.
    plain = trainer(tmp_path, metrics=None).evaluate(Classifier(), data, metrics=Accuracy())
    assert set(plain) == {"loss", "accuracy"}
    assert math.isfinite(plain["loss"])


class Stream(IterableDataset[Any]):
    def __iter__(self) -> Any:
        data = blobs(10)
        return iter([(data[i][0], data[i][1]) for i in range(10)])


def test_an_iterable_dataset_is_evaluated_on_one_process(tmp_path: Path) -> None:
    assert trainer(tmp_path).evaluate(Classifier(), Stream())["accuracy"] >= 0


@pytest.mark.parametrize(
    ("data", "weights", "message"),
    [
        ({}, None, "no set to evaluate"),
        (blobs(0), None, "set 'test': the dataset is empty"),
        (blobs(8), "best_valid_loss", "no best model of that rule"),
        (blobs(8), "/nowhere/at/all", "no such file or folder"),
    ],
)
def test_bad_input_is_named_before_any_batch(
    tmp_path: Path, data: Any, weights: str | None, message: str
) -> None:
    with pytest.raises(TrainerConfigError, match=message):
        trainer(tmp_path).evaluate(Classifier(), data, weights=weights)


def test_weights_of_another_model_are_refused_by_name(tmp_path: Path) -> None:
    run = trainer(tmp_path / "run")
    run.fit(Classifier(), blobs(16), blobs(8))
    with pytest.raises(TrainerConfigError, match=r"(?s)do not fit Sequential: .*size mismatch"):
        run.evaluate(Classifier(classes=4), blobs(8), weights="best_valid_loss")


def test_evaluate_and_predict_count_nothing_of_the_fit_s_state(tmp_path: Path) -> None:
    class Predicts(Classifier):
        def predict_step(self, batch: Any) -> torch.Tensor:
            return self.model(batch[0])

    run = trainer(tmp_path / "run")
    module = Predicts()
    state = run.fit(module, blobs(64), blobs(20, seed=1))
    before = (dict(state.additional_metrics), state.evaluations_done, state.global_step)
    run.evaluate(module, {"other": blobs(12, seed=2)})
    run.predict(module, blobs(12, seed=3))
    assert run.state is state
    assert (dict(state.additional_metrics), state.evaluations_done, state.global_step) == before
    assert set(state.additional_metrics) == {"validation"}
