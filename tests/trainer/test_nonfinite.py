"""A loss that becomes NaN at step k: by default the run stops at the first boundary after k
with nothing non-finite on disk; "skip" skips such steps and ends with finite weights."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file

from accmt_metrics import Accuracy
from accmt_state import TrainingState
from accmt_trainer import HyperParameters, NonFiniteLossError, Trainer

from .conftest import Classifier, blobs

HPS = HyperParameters(epochs=3, batch_size=8, optimizer="SGD", optimizer_kwargs={"lr": 0.1})
NAN_AT = 6  # the optimizer step whose loss is NaN (epoch 1 of 4-step epochs)


class TurnsNaN(Classifier):
    """Its loss is NaN on the batches of optimizer step NAN_AT (and, with ``always``, after)."""

    def __init__(self, always: bool = True) -> None:
        super().__init__()
        self.always = always

    def training_step(self, batch: Any) -> torch.Tensor:
        loss = super().training_step(batch)
        step = self.state.global_step + 1
        if step == NAN_AT or (self.always and step > NAN_AT):
            return loss * float("nan")
        return loss


def make(folder: Path, **options: Any) -> Trainer:
    options.setdefault("checkpoint_every", "1 step")
    return Trainer(HPS, folder, log_with=None, progress_bar=False, metrics=[Accuracy()], **options)


def finite_files(folder: Path) -> list[Path]:
    """Every safetensors file under ``folder``, each checked to hold only finite tensors."""
    files = sorted(folder.rglob("*.safetensors"))
    for file in files:
        for name, tensor in load_file(file).items():
            assert torch.isfinite(tensor).all(), f"{file}:{name} is not finite"
    return files


def test_by_default_the_run_stops_at_the_nan_step_with_nothing_nonfinite_on_disk(
    tmp_path: Path,
) -> None:
    trainer = make(tmp_path / "run", evaluate_every_n_steps=2)
    with pytest.raises(NonFiniteLossError, match=f"NaN or infinite at optimizer step {NAN_AT}"):
        trainer.fit(TurnsNaN(), blobs(32), blobs(16, seed=1))
    assert finite_files(tmp_path / "run")  # checkpoints and the best model, all finite
    newest = sorted((tmp_path / "run" / "checkpoints").glob("checkpoint_*"))[-1]
    assert TrainingState.load(newest / "state.json").global_step == NAN_AT - 1


def test_warn_trains_on_and_says_where(tmp_path: Path) -> None:
    trainer = make(tmp_path / "run", on_nonfinite_loss="warn", checkpoint_every=None)
    with pytest.warns(UserWarning, match="training goes on") as warned:
        state = trainer.fit(TurnsNaN(always=False), blobs(32), blobs(16, seed=1))
    assert state.finished
    # Step NAN_AT's NaN made the weights NaN, so every later loss is NaN too; each step's log
    # (log_every=1) warns once, naming its step.
    assert [str(warning.message) for warning in warned] == [
        f"the training loss became NaN or infinite at optimizer step {step}; training goes on "
        "(on_nonfinite_loss='warn')"
        for step in range(NAN_AT, state.global_step + 1)
    ]


def test_skip_skips_the_nan_steps_and_ends_with_finite_weights(tmp_path: Path) -> None:
    trainer = make(tmp_path / "run", on_nonfinite_loss="skip")
    state = trainer.fit(TurnsNaN(always=False), blobs(32), blobs(16, seed=1))
    assert state.finished
    assert state.skipped_steps == 1
    assert state.global_step == 12
    weights = trainer.accelerator.unwrap_model(trainer.model).state_dict().values()
    assert all(torch.isfinite(w).all() for w in weights)
    assert math.isfinite(state.best_train_loss)
    assert finite_files(tmp_path / "run")
