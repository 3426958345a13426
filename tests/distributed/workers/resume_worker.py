"""A run that can be killed and resumed; used by tests/distributed/test_resume.py.

    resume_worker.py OUT [--kill-at-step N] [--kill-in-checkpoint K] [--async] [--curriculum]

Trains with shuffling, dropout, gradient accumulation and a warm-up scheduler, checkpointing
every 3 optimizer steps into OUT/run. ``--kill-at-step N`` SIGKILLs this process right after
optimizer step N; ``--kill-in-checkpoint K`` SIGKILLs it in the middle of writing the K-th
checkpoint of this launch (after the model and RNGs are written, before the manifest). A run
that completes writes each process's final weights to OUT/final_rank<R>.pt.
``--curriculum`` trains on three stages instead (see ``curriculum``), for 24 optimizer steps.
"""

from __future__ import annotations

import argparse
import os
import signal
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import TensorDataset

from accmt_callbacks import Callback
from accmt_state import TrainingState
from accmt_trainer import AcceleratorModule, HyperParameters, StepsCurriculum, Trainer


def data(n: int, seed: int) -> TensorDataset:
    generator = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, 3, (n,), generator=generator)
    centres = torch.tensor([[2.0, 0.0], [-2.0, 1.0], [0.0, -2.5]])
    return TensorDataset(centres[labels] + 0.7 * torch.randn(n, 2, generator=generator), labels)


def curriculum() -> StepsCurriculum:
    """Stage 0 ends at step 9, a checkpoint's step, after whole passes on one process and in
    the middle of one on two; stage 1 is cut inside its second pass on two processes; stage 2
    takes the rest up to max_steps (24)."""
    stages = StepsCurriculum()
    stages.add(data(40, seed=3), 9)
    stages.add(data(200, seed=1), 8)
    stages.add(data(24, seed=4), -1)
    return stages


class Classifier(AcceleratorModule):
    def __init__(self) -> None:
        torch.manual_seed(0)
        self.model = torch.nn.Sequential(
            torch.nn.Linear(2, 32), torch.nn.ReLU(), torch.nn.Dropout(0.3), torch.nn.Linear(32, 3)
        )

    def training_step(self, batch: Any) -> torch.Tensor:
        return torch.nn.functional.cross_entropy(self.model(batch[0]), batch[1])

    def validation_step(self, key: str, batch: Any) -> torch.Tensor:
        return torch.nn.functional.cross_entropy(self.model(batch[0]), batch[1])


class KillAtStep(Callback):
    def __init__(self, step: int) -> None:
        self.step = step

    def on_after_training_step(self) -> None:
        if self.state.global_step == self.step and self.trainer.accelerator.is_main_process:
            os.kill(os.getpid(), signal.SIGKILL)


def kill_inside_checkpoint(which: int) -> None:
    """SIGKILL the process half-way through the ``which``-th checkpoint it writes: the state
    file is written after Accelerate's files and before the manifest (in the background
    writer's thread when checkpoints are asynchronous)."""
    save = TrainingState.save
    written = []

    def half_write(state: TrainingState, path: str | os.PathLike[str], **options: Any) -> None:
        save(state, path, **options)
        if ".tmp-checkpoint" in str(path):
            written.append(path)
            if len(written) == which:
                os.kill(os.getpid(), signal.SIGKILL)

    TrainingState.save = half_write  # type: ignore[method-assign]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--kill-at-step", type=int)
    parser.add_argument("--kill-in-checkpoint", type=int)
    parser.add_argument("--async", dest="background", action="store_true")
    parser.add_argument("--curriculum", action="store_true")
    args = parser.parse_args()
    hps = HyperParameters.from_dict(
        {
            "epochs": 3,
            "max_steps": 24 if args.curriculum else None,
            "batch_size": 8,
            "optimizer": "AdamW",
            "optimizer_kwargs": {"lr": 0.01},
            "scheduler": "LinearWithWarmup",
            "scheduler_kwargs": {"num_warmup_steps": 4},
        }
    )
    callbacks = [KillAtStep(args.kill_at_step)] if args.kill_at_step else []
    trainer = Trainer(
        hps, args.out / "run", grad_accumulation_steps=2, checkpoint_every="3 steps",
        evaluate_every_n_steps=5, seed=7, log_with=None, progress_bar=False, cpu=True,
        callbacks=callbacks, checkpoint_async=args.background,
    )  # fmt: skip
    if args.kill_in_checkpoint:
        kill_inside_checkpoint(args.kill_in_checkpoint)
    train = curriculum() if args.curriculum else data(200, seed=1)
    state = trainer.fit(Classifier(), train, data(48, seed=2))
    model = trainer.accelerator.unwrap_model(trainer.model)
    weights = {name: value.detach().cpu() for name, value in model.state_dict().items()}
    rank = trainer.accelerator.process_index
    torch.save({"weights": weights, "state": state.to_dict()}, args.out / f"final_rank{rank}.pt")


if __name__ == "__main__":
    main()
