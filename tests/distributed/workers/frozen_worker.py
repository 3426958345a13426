"""Runs of a model with a frozen first layer, killed and resumed; used by
tests/distributed/test_frozen_resume.py.

    frozen_worker.py PLAN.json LAUNCH

PLAN.json lists the launches, each a list of runs, each ``{"out": OUT, "async": bool,
"kill_at_step": N | null, "shift": float}``; this is launch LAUNCH, whose runs go one after the
other in this job. A run trains the toy classifier (hidden layer of 32, dropout) with its first
layer frozen, a weight average and a checkpoint every 3 optimizer steps (in the background with
``async``) into OUT/run; it SIGKILLs its main process right after optimizer step
``kill_at_step`` (the last run of its launch), or writes each process's final weights and
averages to OUT/final_rank<R>.pt. ``shift`` moves the frozen layer's bias: another base, which
a resume refuses; the run then notes the error. Each run appends to OUT/events_rank<R>.jsonl:
"start", "resume" (the step it resumed at), then "kill", "refused" (the error) or "end".
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import _toy as toy
import torch
from _toy import clusters
from resume_worker import Events

from accmt_callbacks import Callback
from accmt_trainer import CheckpointError, HyperParameters, Trainer


class FrozenBase(toy.Classifier):
    def __init__(self, shift: float) -> None:
        super().__init__(hidden=32, activation=torch.nn.ReLU, dropout=0.3)
        self.model[0].requires_grad_(False)
        with torch.no_grad():
            self.model[0].bias[0] += shift


class Watch(Callback):
    def __init__(self, events: Events, kill_at: int | None) -> None:
        self.events, self.kill_at = events, kill_at

    def on_resume(self) -> None:
        self.events.note("resume", step=self.state.global_step)

    def on_after_training_step(self) -> None:
        if self.state.global_step == self.kill_at and self.trainer.accelerator.is_main_process:
            self.events.kill(f"step {self.kill_at}")


def train(run: dict[str, Any], launch: int) -> None:
    out = Path(run["out"])
    out.mkdir(parents=True, exist_ok=True)
    events = Events(out, launch)
    events.note("start")
    hps = HyperParameters.from_dict(
        {
            "epochs": 2,
            "batch_size": 8,
            "optimizer": "AdamW",
            "optimizer_kwargs": {"lr": 0.01},
            "scheduler": "LinearWithWarmup",
            "scheduler_kwargs": {"num_warmup_steps": 2},
        }
    )
    trainer = Trainer(
        hps,
        out / "run",
        checkpoint_every="3 steps",
        seed=7,
        log_with=None,
        progress_bar=False,
        cpu=True,
        callbacks=[Watch(events, run["kill_at_step"])],
        checkpoint_async=run["async"],
        ema_decay=0.9,
    )
    try:
        state = trainer.fit(FrozenBase(run["shift"]), clusters(96, seed=1))
    except CheckpointError as error:
        events.note("refused", error=str(error))
        return
    model = trainer.accelerator.unwrap_model(trainer.model)
    weights = {name: value.detach().cpu() for name, value in model.state_dict().items()}
    averaged = trainer.averaged_weights() or {}
    weights.update({f"average/{name}": value.detach().cpu() for name, value in averaged.items()})
    rank = trainer.accelerator.process_index
    torch.save({"weights": weights, "state": state.to_dict()}, out / f"final_rank{rank}.pt")
    events.note("end", global_step=state.global_step)


def main() -> None:
    plan, launch = Path(sys.argv[1]), int(sys.argv[2])
    for run in json.loads(plan.read_text())[launch]:
        train(run, launch)


if __name__ == "__main__":
    main()
