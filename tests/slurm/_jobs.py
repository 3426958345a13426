"""The training jobs of the SLURM tests: slurm_job_worker.py (tests/distributed/workers) run by
a batch script, its log, and what each of its processes wrote when ``fit`` returned."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..distributed._launch import WORKERS
from ._cluster import Cluster

WORKER = WORKERS / "slurm_job_worker.py"
ACCMT = str(Path(sys.executable).parent / "accmt")
# The worker's run on 2 processes: 2 epochs of 40 optimizer steps.
STEPS = 80
# How the tests start it on 2 CPU processes: one srun task that launches both. (Or, say,
# ("srun", sys.executable) with sbatch's --ntasks=2: a task per process.)
SRUN_ACCMT_LAUNCH = ("srun", ACCMT, "launch", "--cpu", "-N", "2")


@dataclass(frozen=True)
class Run:
    """A job that trains the worker into ``out``."""

    out: Path
    job_id: int

    @property
    def log(self) -> Path:
        return log(self.out, self.job_id)

    def records(self, restarts: int = 0) -> list[dict[str, Any]]:
        return records(self.out, self.job_id, restarts)


def submit(
    slurm: Cluster,
    out: Path,
    *options: str,
    step_seconds: float = 0,
    launch: Sequence[str] = SRUN_ACCMT_LAUNCH,
) -> Run:
    """A batch job that trains the worker into ``out`` (``launch``, by default ``srun accmt
    launch --cpu -N 2``, starting it), its log in out/job-<id>.log; ``options`` are sbatch's.

    srun it is (or ``exec``): a launcher the batch shell starts as a plain child is not what
    SLURM waits for. At a time limit or a cancel the shell dies of its SIGTERM at once, the job
    ends there, and the launcher's processes get no KillWait for their checkpoint: here
    (proctrack/linuxproc) they run on outside the job; where SLURM tracks a job's processes by
    cgroup, they are killed with it."""
    command = [*launch, str(WORKER), str(out), "--step-seconds", str(step_seconds)]
    script = f"#!/bin/sh\n{shlex.join(command)}\n"
    return Run(out, slurm.submit(script, f"--output={out / 'job-%j.log'}", *options))


def submit_forwarding(slurm: Cluster, out: Path, *options: str, step_seconds: float) -> Run:
    """A batch job that runs ``accmt launch --cpu -N 2`` of the worker in the background and
    passes the SIGUSR1 that SLURM sends the batch shell alone (``--signal=B:USR1@N``) on to it,
    as the Trainer's guide shows."""
    launch = [*SRUN_ACCMT_LAUNCH[1:], str(WORKER), str(out), "--step-seconds", str(step_seconds)]
    script = (
        "#!/bin/bash\n"
        f"{shlex.join(launch)} &\n"
        "launcher=$!\n"
        "trap 'kill -USR1 $launcher' USR1\n"
        "wait $launcher\n"
        "wait $launcher\n"
    )
    return Run(out, slurm.submit(script, f"--output={out / 'job-%j.log'}", *options))


def log(out: Path, job_id: int) -> Path:
    return out / f"job-{job_id}.log"


def records(out: Path, job_id: int, restarts: int = 0) -> list[dict[str, Any]]:
    """What each process of the job's start (after ``restarts`` requeues) wrote when its fit
    returned."""
    return [torch.load(out / f"{job_id}.{restarts}_rank{rank}.pt") for rank in range(2)]


def assert_same_weights(run: list[dict[str, Any]], reference: list[dict[str, Any]]) -> None:
    """Each process's final weights are the reference's, bit for bit."""
    for rank, (mine, theirs) in enumerate(zip(run, reference, strict=True)):
        for name, weight in theirs["weights"].items():
            assert torch.equal(mine["weights"][name], weight), (rank, name)


def assert_trained_from_scratch(slurm: Cluster, run: Run) -> None:
    """The job completed, as one run of 2 processes from its start to its end."""
    job = slurm.wait(run.job_id, log=run.log)
    output = run.log.read_text()
    assert (job["JobState"], job["ExitCode"]) == ("COMPLETED", "0:0"), output
    assert output.count("starting afresh") == 1, output  # one run, not one per task
    for record in run.records():
        assert record["world"] == 2
        assert (record["started_at"], record["global_step"]) == (0, STEPS)
        assert record["finished"]
