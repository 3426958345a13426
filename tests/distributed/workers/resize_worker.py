"""Runs stopped at a step and resumed on another number of processes; used by
tests/distributed/test_resize.py.

    resize_worker.py PLAN.json LAUNCH

PLAN.json lists the launches, each a list of runs, and this is launch LAUNCH: one launch (one
start of Python, torch and Accelerate on each process) trains several runs one after another.
A run is a dict: ``out`` (its folder; the Trainer's model_path is OUT/run), ``epochs``,
``scheduler`` (and ``scheduler_kwargs``), ``stop_at`` (request a stop after that optimizer
step, which checkpoints it), ``checkpoint_every``, ``resume``, ``tag``. Each run writes what
it saw to OUT/launch<L><TAG>_rank<R>.pt: the sample indices each training batch held, the
learning rate of each optimizer step, what ``on_resume`` found loaded, the warnings ``fit``
gave, its final counters and schedule, or the message of the CheckpointError that refused it.

The data: 96 samples in batches of 4, so one order of 24 batches an epoch; accumulation 2,
so 12 optimizer steps an epoch on one process and 6 on two.
"""

from __future__ import annotations

import copy
import json
import os
import sys
import warnings
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import Dataset

from accmt_callbacks import Callback
from accmt_trainer import AcceleratorModule, CheckpointError, HyperParameters, Trainer

COUNTERS = ("global_step", "epoch", "batch_iteration", "batches_seen_in_epoch", "finished")


class Indexed(Dataset[tuple[torch.Tensor, torch.Tensor, int]]):
    """Two blobs; each sample also gives its index, so a run can say which samples it read."""

    def __init__(self, n: int) -> None:
        generator = torch.Generator().manual_seed(1)
        self.x = torch.randn(n, 2, generator=generator)
        self.y = (self.x[:, 0] > 0).long()

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor, int]:
        return self.x[index], self.y[index], index


class Recorder(AcceleratorModule):
    def __init__(self) -> None:
        torch.manual_seed(0)
        self.model = torch.nn.Sequential(
            torch.nn.Linear(2, 8), torch.nn.ReLU(), torch.nn.Dropout(0.2), torch.nn.Linear(8, 2)
        )
        self.seen: list[list[int]] = []

    def training_step(self, batch: Any) -> torch.Tensor:
        self.seen.append([self.state.epoch, *batch[2].tolist()])
        return torch.nn.functional.cross_entropy(self.model(batch[0]), batch[1])


class Probe(Callback):
    """Stops the run after ``stop_at``, and notes each optimizer step's learning rate and what
    a resume loaded."""

    def __init__(self, stop_at: int | None) -> None:
        self.stop_at = stop_at
        self.lrs: list[tuple[int, float]] = []
        self.resumed: dict[str, Any] | None = None
        self._window = -1  # the global_step before the window whose lr was noted last

    def on_before_training_step(self, batch: Any) -> None:
        step = self.state.global_step
        if step != self._window:  # a window starts: the lr its optimizer step will use
            self._window = step
            self.lrs.append((step + 1, self.trainer.optimizer.param_groups[0]["lr"]))

    def on_after_training_step(self) -> None:
        step = self.state.global_step
        if step == self.stop_at and step == self._window + 1:
            self.trainer.request_stop(f"stop at step {step}")

    def on_resume(self) -> None:
        trainer = self.trainer
        model = trainer.accelerator.unwrap_model(trainer.model)
        # Copies: training goes on updating the optimizer's tensors in place.
        self.resumed = copy.deepcopy(
            {
                "state": {name: getattr(self.state, name) for name in COUNTERS},
                "model": model.state_dict(),
                "optimizer": trainer.optimizer.state_dict(),
                "scheduler": trainer.scheduler.state_dict(),
            }
        )


def train(spec: dict[str, Any], launch: int) -> None:
    out = Path(spec["out"])
    out.mkdir(parents=True, exist_ok=True)
    hps = HyperParameters.from_dict(
        {
            "epochs": spec.get("epochs", 2),
            "batch_size": 4,
            "optimizer": "AdamW",
            "optimizer_kwargs": {"lr": 0.01},
            "scheduler": spec.get("scheduler", "LinearWithWarmup"),
            "scheduler_kwargs": spec.get("scheduler_kwargs", {"num_warmup_steps": 2}),
        }
    )
    probe = Probe(spec.get("stop_at"))
    trainer = Trainer(
        hps,
        out / "run",
        grad_accumulation_steps=2,
        seed=7,
        log_with=None,
        progress_bar=False,
        cpu=True,
        callbacks=[probe],
        checkpoint_every=spec.get("checkpoint_every", "epoch"),
        resume=spec.get("resume"),
    )
    module = Recorder()
    record: dict[str, Any] = {"launch": launch}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            state = trainer.fit(module, Indexed(96))
        except CheckpointError as error:
            record["refused"] = str(error)
            state = None
    record["warnings"] = [str(w.message) for w in caught if "resuming" in str(w.message)]
    if state is not None:
        scheduler = trainer.scheduler.scheduler
        record.update(
            seen=module.seen,
            lrs=probe.lrs,
            resumed=probe.resumed,
            final={name: getattr(state, name) for name in COUNTERS},
            final_lr=trainer.optimizer.param_groups[0]["lr"],
            schedule={
                "last_epoch": scheduler.last_epoch,
                "T_max": getattr(scheduler, "T_max", None),
                "num_training_steps": _lambda_length(scheduler),
            },
        )
    rank = os.environ.get("RANK", "0")
    torch.save(record, out / f"launch{launch}{spec.get('tag', '')}_rank{rank}.pt")


def _lambda_length(scheduler: Any) -> int | None:
    """The length a warmup schedule's multiplier was built with (a functools.partial)."""
    lambdas = getattr(scheduler, "lr_lambdas", None)
    keywords = getattr(lambdas[0], "keywords", {}) if lambdas else {}
    return keywords.get("num_training_steps")


def main() -> None:
    plan, launch = Path(sys.argv[1]), int(sys.argv[2])
    for spec in json.loads(plan.read_text())[launch]:
        train(spec, launch)


if __name__ == "__main__":
    main()
