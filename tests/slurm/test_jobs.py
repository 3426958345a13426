"""accmt in real SLURM jobs, on the cluster that the tests start (_cluster.py): a batch job
running ``srun accmt launch --cpu -N 2`` completes; a job past its time limit gets SIGTERM,
saves a stop checkpoint and ends TIMEOUT, and the next job of the same script resumes from it
to the uninterrupted run's weights, bit for bit. And the cluster runs a step of ``srun
--ntasks=2`` as two tasks numbered 0 and 1, which the batch shell is not, and a job of two
nodes as a task on each.

The training jobs start together with the session (conftest.py)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from ._cluster import Cluster
from ._jobs import STEPS, Run, assert_same_weights, assert_trained_from_scratch, submit

pytestmark = [pytest.mark.distributed, pytest.mark.slurm]


def test_a_batch_job_of_accmt_launch_on_two_processes_completes(
    slurm: Cluster, uninterrupted: Run
) -> None:
    assert_trained_from_scratch(slurm, uninterrupted)


def test_a_job_past_its_time_limit_checkpoints_and_the_next_job_resumes_bit_for_bit(
    slurm: Cluster, uninterrupted: Run, limited: Run
) -> None:
    job = slurm.wait(limited.job_id, timeout=150, log=limited.log)
    output = limited.log.read_text()
    assert job["JobState"] == "TIMEOUT", output
    assert "DUE TO TIME LIMIT" in output
    # SIGTERM reached both processes; they agreed on a step, checkpointed there and returned.
    assert "(received SIGTERM): the run did not finish" in output
    stopped = limited.records()
    assert [record["finished"] for record in stopped] == [False, False], output
    step = stopped[0]["global_step"]
    assert stopped[1]["global_step"] == step
    assert 0 < step < STEPS

    resumed = submit(slurm, limited.out)
    job = slurm.wait(resumed.job_id, log=resumed.log)
    output = resumed.log.read_text()
    assert (job["JobState"], job["ExitCode"]) == ("COMPLETED", "0:0"), output
    assert f"step {step}/{STEPS}" in output  # "resuming ... from checkpoint_..., step N/80"
    for record in resumed.records():
        assert (record["started_at"], record["global_step"]) == (step, STEPS)
        assert record["finished"]
    slurm.wait(uninterrupted.job_id)
    assert_same_weights(resumed.records(), uninterrupted.records())


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
