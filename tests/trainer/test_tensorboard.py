"""The learning rate reaches the trackers by default: per parameter group when there are
several, and not at all with ``Monitor(learning_rate=False)``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from accmt_metrics import Accuracy
from accmt_trainer import HyperParameters, Monitor, Trainer

from .conftest import Classifier, blobs

# 32 samples in batches of 8: 4 optimizer steps an epoch.
TRAIN, VALID = blobs(32), blobs(16, seed=1)


def fit(folder: Path, epochs: int, **options: Any) -> Trainer:
    hps = HyperParameters(
        epochs=epochs,
        batch_size=8,
        optimizer="SGD",
        optimizer_kwargs={"lr": 0.1},
        scheduler="LinearWithWarmup",
        scheduler_kwargs={"num_warmup_steps": 2},
    )
    options = {"log_with": "tensorboard", "progress_bar": False, "seed": 0, **options}
    trainer = Trainer(hps, folder, metrics=[Accuracy()], **options)
    trainer.fit(Classifier(), TRAIN, VALID)
    return trainer


def events(folder: Path) -> EventAccumulator:
    accumulator = EventAccumulator(str(folder), size_guidance={"scalars": 0, "tensors": 0})
    accumulator.Reload()
    return accumulator


def test_several_parameter_groups_log_each_learning_rate(tmp_path: Path) -> None:
    logged: list[dict[str, float]] = []

    class TwoGroups(Classifier):
        def get_optimizer(self) -> Any:
            import torch

            first, second = self.model[0], self.model[3]
            return torch.optim.SGD(
                [{"params": first.parameters()}, {"params": second.parameters(), "lr": 0.01}],
                lr=0.1,
            )

    hps = HyperParameters(epochs=1, batch_size=8, optimizer="SGD", optimizer_kwargs={"lr": 0.1})
    trainer = Trainer(hps, tmp_path, log_with=None, progress_bar=False)
    trainer.log = lambda values, step=None: logged.append(dict(values))  # type: ignore[method-assign]
    trainer.fit(TwoGroups(), TRAIN)
    training = [values for values in logged if "train/loss" in values]
    assert training
    assert training[0]["train/lr/0"] == pytest.approx(0.1)
    assert training[0]["train/lr/1"] == pytest.approx(0.01)
    assert "train/lr" not in training[0]


def test_the_learning_rate_can_be_turned_off(tmp_path: Path) -> None:
    fit(tmp_path, epochs=1, monitor=Monitor(learning_rate=False))
    logged = events(tmp_path / "logs" / tmp_path.name)
    assert "train/loss" in logged.Tags()["scalars"]
    assert not [tag for tag in logged.Tags()["scalars"] if tag.startswith("train/lr")]
