"""accmt in real SLURM jobs, on the cluster of one node that the tests start (_cluster.py): a
batch job running ``srun accmt launch --cpu -N 2`` completes; a job past its time limit gets
SIGTERM, saves a stop checkpoint and ends TIMEOUT, and the next job of the same script resumes
from it to the uninterrupted run's weights, bit for bit. And the cluster runs a step of
``srun --ntasks=2`` as two tasks numbered 0 and 1, which the batch shell is not.

The two training jobs start together (a time limit takes 60 to 90 s to strike: SLURM checks
them every 30 s), so the uninterrupted one costs no time of its own."""

from __future__ import annotations

import shlex
import socket
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch

from ..distributed._launch import WORKERS
from ._cluster import Cluster

pytestmark = [pytest.mark.distributed, pytest.mark.slurm]

ACCMT = Path(sys.executable).parent / "accmt"
STEPS = 80  # slurm_job_worker.py's run on 2 processes: 2 epochs of 40 optimizer steps


def submit(slurm: Cluster, out: Path, *options: str, step_seconds: float = 0) -> int:
    """A batch job that trains slurm_job_worker.py into ``out`` on 2 CPU processes with ``srun
    accmt launch``, its log in out/job-<id>.log.

    srun it is (or ``exec``): a launcher the batch shell starts as a plain child is not what
    SLURM waits for. At a time limit or a cancel the shell dies of its SIGTERM at once, the job
    ends there, and the launcher's processes get no KillWait for their checkpoint: here
    (proctrack/linuxproc) they run on outside the job; where SLURM tracks a job's processes by
    cgroup, they are killed with it."""
    worker = WORKERS / "slurm_job_worker.py"
    command = ["srun", str(ACCMT), "launch", "--cpu", "-N", "2", str(worker), str(out)]
    script = f"#!/bin/sh\n{shlex.join([*command, '--step-seconds', str(step_seconds)])}\n"
    return slurm.submit(script, f"--output={out / 'job-%j.log'}", *options)


def log(out: Path, job_id: int) -> Path:
    return out / f"job-{job_id}.log"


def records(out: Path, job_id: int, restarts: int = 0) -> list[dict[str, Any]]:
    """What each process of the job's start (after ``restarts`` requeues) wrote when its fit
    returned."""
    return [torch.load(out / f"{job_id}.{restarts}_rank{rank}.pt") for rank in range(2)]


@dataclass
class Jobs:
    whole: Path
    whole_id: int
    limited: Path
    limited_id: int


@pytest.fixture(scope="module")
def jobs(slurm: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Jobs:
    """Submitted together: the uninterrupted run, and the same run slowed to 1.5 s a step
    (2 minutes in all) under a time limit of 1 minute."""
    whole, limited = tmp_path_factory.mktemp("whole"), tmp_path_factory.mktemp("limited")
    whole_id = submit(slurm, whole)
    limited_id = submit(slurm, limited, "--time=1", step_seconds=1.5)
    return Jobs(whole, whole_id, limited, limited_id)


def test_a_batch_job_of_accmt_launch_on_two_processes_completes(slurm: Cluster, jobs: Jobs) -> None:
    job = slurm.wait(jobs.whole_id, log=log(jobs.whole, jobs.whole_id))
    output = log(jobs.whole, jobs.whole_id).read_text()
    assert (job["JobState"], job["ExitCode"]) == ("COMPLETED", "0:0"), output
    assert "starting afresh" in output
    for record in records(jobs.whole, jobs.whole_id):
        assert record["world"] == 2
        assert (record["started_at"], record["global_step"]) == (0, STEPS)
        assert record["finished"]


def test_a_job_past_its_time_limit_checkpoints_and_the_next_job_resumes_bit_for_bit(
    slurm: Cluster, jobs: Jobs
) -> None:
    limited, first = jobs.limited, jobs.limited_id
    job = slurm.wait(first, timeout=150, log=log(limited, first))
    output = log(limited, first).read_text()
    assert job["JobState"] == "TIMEOUT", output
    assert "DUE TO TIME LIMIT" in output
    # SIGTERM reached both processes; they agreed on a step, checkpointed there and returned.
    assert "(received SIGTERM): the run did not finish" in output
    stopped = records(limited, first)
    assert [record["finished"] for record in stopped] == [False, False], output
    step = stopped[0]["global_step"]
    assert stopped[1]["global_step"] == step
    assert 0 < step < STEPS

    second = submit(slurm, limited)
    job = slurm.wait(second, log=log(limited, second))
    output = log(limited, second).read_text()
    assert (job["JobState"], job["ExitCode"]) == ("COMPLETED", "0:0"), output
    assert f"step {step}/{STEPS}" in output  # "resuming ... from checkpoint_..., step N/80"
    slurm.wait(jobs.whole_id)
    whole = records(jobs.whole, jobs.whole_id)
    for rank, (resumed, reference) in enumerate(zip(records(limited, second), whole, strict=True)):
        assert (resumed["started_at"], resumed["global_step"]) == (step, STEPS)
        assert resumed["finished"]
        for name, weight in reference["weights"].items():
            assert torch.equal(resumed["weights"][name], weight), (rank, name)


def test_srun_runs_two_tasks_numbered_apart_from_the_batch_shell(
    slurm: Cluster, tmp_path: Path
) -> None:
    """What a run started by srun alone reads: each task has its own SLURM_PROCID and a
    SLURM_STEP_ID; the batch shell around them has SLURM_PROCID 0 and SLURM_NTASKS 2 too, but
    no SLURM_STEP_ID, and must not take itself for task 0."""
    show = "echo $SLURM_PROCID/$SLURM_NTASKS/${SLURM_STEP_ID:-none}/$SLURM_LOCALID"
    script = f"#!/bin/sh\n{show} > batch.txt\nsrun sh -c '{show} > task$SLURM_PROCID.txt'\n"
    job_id = slurm.submit(script, "--ntasks=2", f"--chdir={tmp_path}", "--output=job.log")
    job = slurm.wait(job_id, log=tmp_path / "job.log")
    assert (job["JobState"], job["ExitCode"]) == ("COMPLETED", "0:0")
    assert (tmp_path / "batch.txt").read_text() == "0/2/none/0\n"
    assert (tmp_path / "task0.txt").read_text() == "0/2/0/0\n"
    assert (tmp_path / "task1.txt").read_text() == "1/2/0/1\n"


def test_a_job_of_two_nodes_runs_a_task_on_each_and_meets_on_this_machine(
    slurm: Cluster, tmp_path: Path
) -> None:
    """The cluster's two nodes are two slurmds of this machine: ``--nodes=2`` runs one task on
    each, SLURM numbers the nodes 0 and 1, and the first of the step's nodes (where the
    processes of a job of several machines meet) is a name that resolves to this machine."""
    show = "echo $SLURMD_NODENAME $SLURM_NODEID $SLURM_PROCID $SLURM_STEP_NODELIST"
    script = f"#!/bin/sh\nsrun sh -c '{show} > node$SLURM_NODEID.txt'\n"
    options = ["--nodes=2", "--ntasks-per-node=1", f"--chdir={tmp_path}", "--output=job.log"]
    job = slurm.wait(slurm.submit(script, *options), log=tmp_path / "job.log")
    assert (job["JobState"], job["ExitCode"]) == ("COMPLETED", "0:0")
    first, second = slurm.nodes
    nodes = slurm.command("scontrol", "show", "hostnames", f"{first},{second}").split()
    assert nodes == [first, second]
    for number, node in enumerate(nodes):
        name, node_id, rank, step_nodes = (tmp_path / f"node{number}.txt").read_text().split()
        assert (name, node_id, rank) == (node, str(number), str(number))
        assert slurm.command("scontrol", "show", "hostnames", step_nodes).split() == nodes
    assert socket.gethostbyname(first)  # raises where the name does not resolve
