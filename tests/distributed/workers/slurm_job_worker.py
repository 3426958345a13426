"""A run for SLURM jobs to start, stop and resume; used by tests/slurm.

    slurm_job_worker.py OUT [--step-seconds S]

Trains the toy classifier for 2 epochs over 640 points in batches of 8 (40 optimizer steps an
epoch on 2 processes, 80 on one) into OUT/run, checkpointing every epoch, and
resumes from OUT/run's newest checkpoint when there is one. ``--step-seconds S`` sleeps S
seconds after every step, so that a job's time limit or signal finds it training, in a job's
first start only (a requeued job, ``SLURM_RESTART_COUNT`` 1 or more, goes at full speed); the
sleep draws nothing, so the weights are those of a run without it. Rank 0 prints ``step N`` every
20 steps (the job's log shows how far it got). When ``fit`` returns, each process writes
OUT/<SLURM_JOB_ID>.<SLURM_RESTART_COUNT or 0>_rank<R>.pt: the step it started from and ended at,
whether the run finished, the number of processes, and its final weights.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

import torch
from _toy import Classifier, blobs

from accmt_callbacks import Callback
from accmt_trainer import HyperParameters, Trainer

POINTS = 640


class Pace(Callback):
    """Notes the step the run starts from; sleeps after each step; rank 0 says where it is."""

    def __init__(self, step_seconds: float) -> None:
        self.step_seconds = step_seconds
        self.started_at: int | None = None

    def on_fit_start(self) -> None:  # resuming, the state is the checkpoint's already
        self.started_at = self.state.global_step

    def on_after_training_step(self) -> None:
        if self.step_seconds:
            time.sleep(self.step_seconds)
        step = self.state.global_step
        if step % 20 == 0 and self.trainer.accelerator.is_main_process:
            print(f"step {step}", flush=True)


def main(out: Path, step_seconds: float) -> None:
    restarts = int(os.environ.get("SLURM_RESTART_COUNT") or 0)
    pace = Pace(0.0 if restarts else step_seconds)
    trainer = Trainer(
        HyperParameters(epochs=2, batch_size=8, optimizer="AdamW", optimizer_kwargs={"lr": 0.01}),
        out / "run",
        seed=3,
        log_with=None,
        progress_bar=False,
        cpu=True,
        checkpoint_every="epoch",
        callbacks=[pace],
    )
    state = trainer.fit(Classifier(hidden=8), blobs(POINTS))
    model = trainer.accelerator.unwrap_model(trainer.model)
    weights: dict[str, Any] = {k: v.detach().clone() for k, v in model.state_dict().items()}
    record = {
        "started_at": pace.started_at,
        "global_step": state.global_step,
        "finished": state.finished,
        "world": trainer.accelerator.num_processes,
        "weights": weights,
    }
    start = f"{os.environ.get('SLURM_JOB_ID', 'nojob')}.{restarts}"
    torch.save(record, out / f"{start}_rank{trainer.accelerator.process_index}.pt")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--step-seconds", type=float, default=0.0)
    arguments = parser.parse_args()
    main(arguments.out, arguments.step_seconds)
