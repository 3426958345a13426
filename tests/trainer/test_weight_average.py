"""``Trainer(ema_decay=d)``: an exponential moving average of the weights, from the initial
weights, updated after every optimizer step; fit's validation and the best models use it,
training goes on with the raw weights, and a resumed run ends with the same average bit for
bit. (SIGKILL and resume on 2 processes: tests/distributed/test_resume.py.)"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file

from accmt_callbacks import Callback
from accmt_metrics import Accuracy
from accmt_trainer import HyperParameters, Trainer, TrainerConfigError

from .conftest import Classifier, blobs

DECAY = 0.8
TRAIN, VALIDATION = blobs(64), blobs(24, seed=1)


class RecordsWeights(Callback):
    """The raw weights at the start and after every optimizer step."""

    def __init__(self) -> None:
        self.weights: list[dict[str, torch.Tensor]] = []

    def _take(self) -> None:
        model = self.trainer.accelerator.unwrap_model(self.trainer.model)
        self.weights.append({k: v.detach().clone() for k, v in model.named_parameters()})

    def on_fit_start(self) -> None:
        self._take()

    def on_after_optimizer_step(self, optimizer: Any) -> None:
        self._take()


class StopAt(Callback):
    def __init__(self, step: int) -> None:
        self.step = step

    def on_after_training_step(self) -> None:
        if self.state.global_step == self.step:
            self.trainer.request_stop(f"stop at {self.step}")


def trainer(folder: Path, epochs: int = 2, **options: Any) -> Trainer:
    hps = HyperParameters(
        epochs=epochs, batch_size=8, optimizer="AdamW", optimizer_kwargs={"lr": 0.05}
    )
    quiet = {"log_with": None, "progress_bar": False, "metrics": Accuracy(), "ema_decay": DECAY}
    return Trainer(hps, folder, **{**quiet, **options})


def average_up_to(weights: list[dict[str, torch.Tensor]], step: int) -> dict[str, torch.Tensor]:
    """The average straight from the definition, after ``step`` optimizer steps."""
    average = {name: value.double() for name, value in weights[0].items()}
    for raw in weights[1 : step + 1]:
        average = {k: DECAY * average[k] + (1 - DECAY) * raw[k].double() for k in average}
    return average


@pytest.mark.parametrize("decay", [1.0, -0.1, 1.5, "0.9", True])
def test_a_decay_outside_0_1_is_refused_when_the_trainer_is_made(
    tmp_path: Path, decay: Any
) -> None:
    with pytest.raises(
        TrainerConfigError, match=r"ema_decay=.*expected None or a number in \[0, 1\)"
    ):
        Trainer(HyperParameters(), tmp_path, ema_decay=decay)


def test_the_best_model_is_the_average_of_the_run_s_weights(tmp_path: Path) -> None:
    recorder = RecordsWeights()
    run = trainer(tmp_path / "run", callbacks=[recorder], evaluate_every_n_steps=3)
    run.register_model_saving("best_valid_loss")
    module = Classifier()
    run.fit(module, TRAIN, VALIDATION)
    folder = tmp_path / "run" / "best_valid_loss"
    step = json.loads((folder / "state.json").read_text())["global_step"]
    saved = load_file(folder / "model.safetensors")
    expected = average_up_to(recorder.weights, step)
    for name, value in expected.items():
        torch.testing.assert_close(saved[name].double(), value, rtol=1e-6, atol=1e-6)
    # What fit recorded for that model is what the averaged weights give.
    recorded = json.loads((folder / "metrics.json").read_text())["values"]
    found = run.evaluate(module, {"validation": VALIDATION}, weights="best_valid_loss")
    assert found["validation"]["loss"] == pytest.approx(recorded["valid_loss"], rel=1e-6)
    # Training went on with the raw weights; the average is kept beside them.
    last = recorder.weights[-1]
    run_end = average_up_to(recorder.weights, len(recorder.weights) - 1)
    averaged = run.averaged_weights()
    assert averaged is not None
    for name, value in run_end.items():
        torch.testing.assert_close(averaged[name].double(), value, rtol=1e-6, atol=1e-6)
        assert not torch.equal(averaged[name], last[name])


def test_a_resumed_run_ends_with_the_same_average_bit_for_bit(tmp_path: Path) -> None:
    whole = trainer(tmp_path / "whole")
    whole.fit(Classifier(), TRAIN, VALIDATION)
    stopped = trainer(tmp_path / "stopped", callbacks=[StopAt(5)], checkpoint_every="2 steps")
    stopped.fit(Classifier(), TRAIN, VALIDATION)
    resumed = trainer(tmp_path / "stopped", checkpoint_every="2 steps")
    state = resumed.fit(Classifier(), TRAIN, VALIDATION)
    assert state.global_step == 16
    assert state.finished
    for name, value in (whole.averaged_weights() or {}).items():
        assert torch.equal(value, (resumed.averaged_weights() or {})[name]), name
    for name, value in whole.model.state_dict().items():
        assert torch.equal(value, resumed.model.state_dict()[name]), name


def test_no_average_without_ema_decay(tmp_path: Path) -> None:
    run = trainer(tmp_path, epochs=1, ema_decay=None)
    run.fit(Classifier(), TRAIN)
    assert run.averaged_weights() is None
