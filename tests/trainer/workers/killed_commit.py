"""A run SIGKILLed inside a checkpoint's commit: ``killed_commit.py FOLDER K [--async]``.

Checkpoints every step, keeping one. At the K-th commit the process kills itself once the new
checkpoint is synced, renamed into place and pointed to, before the old one is removed: the
window in which both are on the disk. The kill is a real SIGKILL, sent from the background
writer's thread while the training thread goes on.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

from slow_run import Linear, data

import accmt_trainer.checkpointing._commit as commit
from accmt_trainer import HyperParameters, Trainer


def run(folder: Path, background: bool, **options: object) -> Trainer:
    """The run the test kills, resumes and compares: 2 epochs of 12 steps."""
    hps = HyperParameters(epochs=2, batch_size=8, optimizer="AdamW", optimizer_kwargs={"lr": 0.05})
    quiet = {"seed": 0, "log_with": None, "progress_bar": False, "cpu": True}
    every = {"checkpoint_every": "1 step", "max_checkpoints": 1, "checkpoint_async": background}
    return Trainer(hps, folder, **quiet, **every, **options)  # type: ignore[arg-type]


def kill_before_removal(which: int) -> None:
    retain, commits = commit.retain, []

    def killed(root: Path, keep: int | None) -> None:
        commits.append(root)
        if len(commits) == which:
            os.kill(os.getpid(), signal.SIGKILL)
        retain(root, keep)

    commit.retain = killed


def main() -> None:
    folder, which = Path(sys.argv[1]), int(sys.argv[2])
    kill_before_removal(which)
    run(folder, "--async" in sys.argv).fit(Linear(), data())
    sys.exit("the run was not killed")


if __name__ == "__main__":
    main()
