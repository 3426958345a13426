"""Mistakes fail before the first optimizer step: no step taken, no checkpoint written, and
the error names the option, the value and what was available."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils.data import TensorDataset

from accmt_callbacks import Callback, EarlyStopping
from accmt_metrics import Accuracy
from accmt_trainer import (
    HyperParameters,
    StepOutputError,
    Trainer,
    TrainerConfigError,
    TrainerError,
)

from .conftest import Classifier, blobs

HPS = HyperParameters(epochs=2, batch_size=8, optimizer="SGD", optimizer_kwargs={"lr": 0.1})


class Steps(Callback):
    def __init__(self) -> None:
        self.steps = 0

    def on_before_training_step(self, batch: Any) -> None:
        self.steps += 1


def make(folder: Path, **options: Any) -> tuple[Trainer, Steps]:
    steps = Steps()
    options.setdefault("metrics", [Accuracy()])
    options["callbacks"] = [steps, *options.get("callbacks", [])]
    return Trainer(HPS, folder, log_with=None, progress_bar=False, **options), steps


def fails_before_training(
    trainer: Trainer, steps: Steps, error: type[Exception], match: str, **data: Any
) -> None:
    module = data.pop("module", Classifier())
    with pytest.raises(error, match=match) as caught:
        trainer.fit(module, data.get("train", blobs(32)), data.get("val", blobs(16, seed=1)))
    assert isinstance(caught.value, TrainerError)
    assert steps.steps <= 1  # at most the step whose output was wrong, never an optimizer step
    assert trainer.state.global_step == 0
    assert not (trainer.model_path / "checkpoints").exists()


def test_a_saving_rule_that_nothing_reports_names_the_closest(tmp_path: Path) -> None:
    trainer, steps = make(tmp_path / "run")
    trainer.register_model_saving("acuracy")
    fails_before_training(
        trainer,
        steps,
        TrainerConfigError,
        r"register_model_saving\('acuracy'\) watches 'acuracy'.*\['accuracy', 'loss'\].*did you "
        r"mean 'accuracy'",
    )


def test_a_saving_rule_on_an_unknown_set_is_named(tmp_path: Path) -> None:
    trainer, steps = make(tmp_path / "run")
    trainer.register_model_saving("accuracy@valid")
    fails_before_training(
        trainer, steps, TrainerConfigError, r"no validation set named 'valid'.*\['validation'\]"
    )


def test_an_early_stopping_monitor_that_nothing_reports_is_named(tmp_path: Path) -> None:
    trainer, steps = make(tmp_path / "run", callbacks=[EarlyStopping("acc", mode="max")])
    fails_before_training(
        trainer, steps, TrainerConfigError, r"callbacks\[1\] EarlyStopping\(monitor='acc'\)"
    )


def test_a_patience_for_an_unknown_rule_is_named(tmp_path: Path) -> None:
    trainer, steps = make(tmp_path / "run", patience={"acuracy": 2})
    fails_before_training(trainer, steps, TrainerConfigError, r"patience.*'acuracy'")


@pytest.mark.parametrize("which", ["train", "val"])
def test_empty_data_is_named(tmp_path: Path, which: str) -> None:
    trainer, steps = make(tmp_path / "run")
    empty = TensorDataset(torch.zeros(0, 2), torch.zeros(0, dtype=torch.long))
    match = "train_dataset is empty" if which == "train" else "validation set 'validation' is empty"
    fails_before_training(trainer, steps, TrainerConfigError, match, **{which: empty})


def test_a_model_path_that_cannot_be_written_is_named(tmp_path: Path) -> None:
    (tmp_path / "a_file").write_text("not a folder")
    trainer, steps = make(tmp_path / "a_file" / "run")
    with pytest.raises(TrainerConfigError, match=r"Trainer\(model_path=.*a_file/run.*cannot"):
        trainer.fit(Classifier(), blobs(32), blobs(16, seed=1))
    assert steps.steps == 0


def test_a_logging_dir_that_cannot_be_written_is_named(tmp_path: Path) -> None:
    (tmp_path / "a_file").write_text("not a folder")
    logs = tmp_path / "a_file" / "logs"
    steps = Steps()
    trainer = Trainer(
        HPS,
        tmp_path / "run",
        log_with="tensorboard",
        logging_dir=logs,
        progress_bar=False,
        metrics=[Accuracy()],
        callbacks=[steps],
    )
    match = r"Trainer\(logging_dir=.*a_file/logs.*cannot be written"
    fails_before_training(trainer, steps, TrainerConfigError, match)


def test_training_data_that_gives_no_batch_is_named(tmp_path: Path) -> None:
    # Not empty, but 4 samples in batches of 8 with the last batch dropped is no batch at all.
    trainer, steps = make(tmp_path / "run", dataloader_drop_last=True)
    fails_before_training(
        trainer,
        steps,
        TrainerConfigError,
        r"train_dataset=\.\.\.\): the training data gives no batch.*dataloader_drop_last=False",
        train=blobs(4),
    )


class Returns(Classifier):
    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind

    def training_step(self, batch: Any) -> Any:
        loss = super().training_step(batch)
        return {
            "none": None,
            "float": float(loss.detach()),  # float(loss) would also draw torch's warning
            "vector": loss.repeat(3),
            "detached": loss.detach(),
        }[self.kind]


@pytest.mark.parametrize(
    ("kind", "match"),
    [
        ("none", r"training_step\(batch\) returned None; return the loss"),
        ("float", r"returned float .*not `loss.item\(\)`"),
        ("vector", r"returned a tensor of shape \(3,\); return a scalar"),
        ("detached", r"returned a tensor with no graph"),
    ],
)
def test_a_bad_training_step_output_is_named(tmp_path: Path, kind: str, match: str) -> None:
    trainer, steps = make(tmp_path / "run")
    fails_before_training(trainer, steps, StepOutputError, match, module=Returns(kind))


class BadValidation(Classifier):
    def validation_step(self, key: str, batch: Any) -> Any:
        return torch.ones(4)


def test_a_bad_validation_step_output_is_named_by_the_sanity_check(tmp_path: Path) -> None:
    trainer, steps = make(tmp_path / "run", metrics=[])
    fails_before_training(
        trainer,
        steps,
        StepOutputError,
        r"validation_step\('validation', batch\) returned a loss of Tensor shape \(4,\)",
        module=BadValidation(),
    )
    assert steps.steps == 0


def test_the_sanity_check_can_be_turned_off(tmp_path: Path) -> None:
    trainer, steps = make(tmp_path / "run", metrics=[], sanity_check=False)
    with pytest.raises(StepOutputError):
        trainer.fit(BadValidation(), blobs(32), blobs(16, seed=1))
    assert steps.steps == 4  # the first epoch trained, then its evaluation failed


class ReadsNames(Callback):
    def __init__(self) -> None:
        self.seen: list[Any] = []

    def on_fit_start(self) -> None:
        self.seen.append(self.trainer.latest_fit.reported_names)


@pytest.mark.parametrize("sanity_check", [True, False])
def test_callbacks_read_the_names_the_sanity_check_reported(
    tmp_path: Path, sanity_check: bool
) -> None:
    reads = ReadsNames()
    trainer, _ = make(tmp_path / "run", callbacks=[reads], sanity_check=sanity_check)
    assert trainer.latest_fit is None
    trainer.fit(Classifier(), blobs(32), {"clean": blobs(16, seed=1), "noisy": blobs(8, seed=2)})
    names = {"clean": ["accuracy", "loss"], "noisy": ["accuracy", "loss"]}
    assert reads.seen == [names if sanity_check else None]
