"""accmt 1.x's Evaluator, through ``accmt``: a 1.x program runs unchanged, on
``Trainer.evaluate`` (every sample once)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils.data import TensorDataset

from accmt import AcceleratorModule, Evaluator, TrainerConfigError
from accmt.evaluator import Evaluator as EvaluatorByItsPath
from accmt.metrics import Metric


class Accuracy(Metric):
    def compute(self, predictions: Any, references: Any) -> dict[str, float]:
        return {"accuracy": (predictions == references).float().mean().item()}


class Module(AcceleratorModule):
    def __init__(self) -> None:
        torch.manual_seed(0)
        self.model = torch.nn.Linear(2, 3)
        self.evaluated_in_eval_mode: list[bool] = []

    def test_step(self, batch: Any) -> dict[str, Any]:
        features, labels = batch
        self.evaluated_in_eval_mode.append(not self.model.training)
        logits = self.model(features)
        return {
            "loss": torch.nn.functional.cross_entropy(logits, labels),
            "accuracy": (logits.argmax(-1), labels),
        }

    def other_step(self, batch: Any) -> dict[str, Any]:
        _, labels = batch
        return {"accuracy": (torch.zeros_like(labels), labels)}


def data(n: int = 30) -> TensorDataset:
    generator = torch.Generator().manual_seed(1)
    return TensorDataset(torch.randn(n, 2, generator=generator), torch.randint(0, 3, (n,)))


def by_hand(module: Module, dataset: TensorDataset, batch_size: int) -> dict[str, float]:
    features, labels = dataset.tensors
    with torch.no_grad():
        # In the evaluator's batches: the same shapes, so the same logits to the bit (one
        # forward over the whole set may round otherwise: MKL/oneDNN pick kernels by shape),
        # and the accuracy below is a count of the evaluator's own argmaxes.
        logits = torch.cat(
            [module.model(features[i : i + batch_size]) for i in range(0, len(labels), batch_size)]
        )
        losses = [
            torch.nn.functional.cross_entropy(
                logits[i : i + batch_size], labels[i : i + batch_size]
            )
            for i in range(0, len(labels), batch_size)
        ]
    correct = (logits.argmax(-1) == labels).float().mean().item()
    return {"loss": torch.stack(losses).double().mean().item(), "accuracy": correct}


def test_a_1x_program_with_evaluator_runs_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # 1.x writes results.json beside the program
    module, dataset = Module(), data()
    evaluator = Evaluator(metrics=Accuracy("accuracy"), batch_size=4)
    results = evaluator.evaluate(module, dataset)
    assert results == pytest.approx(by_hand(module, dataset, 4), rel=1e-6)
    assert json.loads((tmp_path / "results.json").read_text()) == results
    assert module.evaluated_in_eval_mode == [True] * 8  # 30 samples in batches of 4
    assert module.model.training  # given back in training mode


def test_another_method_and_no_results_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    dataset = data()
    results = EvaluatorByItsPath(Accuracy("accuracy"), batch_size=7).evaluate(
        Module(), dataset, eval_logic_fn_name="other_step", results_output=None
    )
    share_of_zeros = (dataset.tensors[1] == 0).float().mean().item()
    assert results == {"accuracy": pytest.approx(share_of_zeros)}
    assert not (tmp_path / "results.json").exists()


def test_a_missing_method_is_named(tmp_path: Path) -> None:
    with pytest.raises(TrainerConfigError, match="has no method 'nope'"):
        Evaluator().evaluate(Module(), data(), eval_logic_fn_name="nope", results_output=None)
