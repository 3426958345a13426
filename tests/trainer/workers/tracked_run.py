"""A run that logs to a tracker and can be killed: ``tracked_run.py FOLDER TRACKER LAUNCH
[--kill-at-step N]``.

Trains 24 optimizer steps (2 epochs of 12), logging every step to TRACKER (``mlflow`` or
``wandb``, configured by the environment: MLFLOW_TRACKING_URI, WANDB_MODE and WANDB_DIR), with a
checkpoint every 4 steps and a validation each epoch. ``additional_tracker_config`` holds
``launch: LAUNCH``. ``--kill-at-step N`` SIGKILLs the process a second after step N's training
step (``on_after_training_step``: before step N is logged, so steps up to N - 1 are), the time a
run that trains for minutes gives its tracker's writer to flush what it was given."""

from __future__ import annotations

import argparse
import os
import signal
import time
from pathlib import Path
from typing import Any

import torch
from slow_run import Linear, data

from accmt_callbacks import Callback
from accmt_trainer import HyperParameters, Trainer


class KillAtStep(Callback):
    def __init__(self, step: int) -> None:
        self.step = step

    def on_after_training_step(self) -> None:
        if self.state.global_step == self.step:
            time.sleep(1.0)
            os.kill(os.getpid(), signal.SIGKILL)


class Validated(Linear):
    def validation_step(self, key: str, batch: Any) -> torch.Tensor:
        return self.training_step(batch)


def fit(
    folder: Path, tracker: str, launch: int, callbacks: list[Callback], epochs: int = 2
) -> Trainer:
    hps = HyperParameters(
        epochs=epochs, batch_size=8, optimizer="SGD", optimizer_kwargs={"lr": 0.1}
    )
    trainer = Trainer(
        hps,
        folder,
        log_with=tracker,
        additional_tracker_config={"launch": launch},
        checkpoint_every="4 steps",
        callbacks=callbacks,
        seed=0,
        progress_bar=False,
        cpu=True,
    )
    trainer.fit(Validated(), data(), data())
    return trainer


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("folder", type=Path)
    parser.add_argument("tracker", choices=["mlflow", "wandb"])
    parser.add_argument("launch", type=int)
    parser.add_argument("--kill-at-step", type=int)
    arguments = parser.parse_args()
    kill = [] if arguments.kill_at_step is None else [KillAtStep(arguments.kill_at_step)]
    fit(arguments.folder, arguments.tracker, arguments.launch, kill)


if __name__ == "__main__":
    main()
