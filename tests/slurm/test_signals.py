"""SLURM's warning signal, on the cluster that the tests start: the run stops with a checkpoint,
its main process requeues the job, and the requeued job resumes to the uninterrupted run's
weights, bit for bit. Sent to the steps (``scancel --signal=USR1``, what ``#SBATCH
--signal=USR1@N`` does), and sent by SLURM to the batch shell alone at the time it chooses
(``#SBATCH --signal=B:USR1@N``), which passes it to the launcher. The worker's Trainer takes
the defaults, ``requeue_signal="SIGUSR1"`` and ``auto_requeue=True``; it paces its steps in a
job's first start only, so the requeued start runs at full speed."""

from __future__ import annotations

import re
import time

import pytest

from ._cluster import Cluster
from ._jobs import STEPS, Run, assert_same_weights

pytestmark = [pytest.mark.distributed, pytest.mark.slurm]


def wait_for_line(run: Run, text: str, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while not (run.log.exists() and text in run.log.read_text()):
        assert time.monotonic() < deadline, f"no {text!r} in job {run.job_id}'s log"
        time.sleep(0.25)


def check_requeued_and_resumed(slurm: Cluster, run: Run, uninterrupted: Run) -> None:
    """The job stopped on SIGUSR1 with a checkpoint, requeued itself once, and its second start
    resumed from that checkpoint to the uninterrupted weights. (What the first start's script
    does after ``fit`` races the requeue, which ends the job's processes: only the second
    start's records are read.)"""
    job = slurm.wait(run.job_id, lambda job: job["JobState"] == "COMPLETED", log=run.log)
    output = run.log.read_text()
    assert (job["Restarts"], job["ExitCode"]) == ("1", "0:0"), output
    assert "DUE TO JOB REQUEUE" in output
    assert f"requeued SLURM job {run.job_id}" in output
    stopped = re.search(r"stopped at epoch \d+, step (\d+) \(received SIGUSR1\)", output)
    assert stopped, output
    step = int(stopped.group(1))
    assert 0 < step < STEPS
    assert f"step {step}/{STEPS}" in output  # the second start's "resuming ... step N/80"
    resumed = run.records(restarts=1)
    for record in resumed:
        assert (record["started_at"], record["global_step"]) == (step, STEPS)
        assert record["finished"]
    slurm.wait(uninterrupted.job_id)
    assert_same_weights(resumed, uninterrupted.records())


def test_the_warning_signal_to_the_steps_requeues_the_job_which_resumes(
    slurm: Cluster, uninterrupted: Run, warned: Run
) -> None:
    wait_for_line(warned, "step 20")  # both processes are in fit's loop, their handlers set
    slurm.command("scancel", "--signal=USR1", str(warned.job_id))
    check_requeued_and_resumed(slurm, warned, uninterrupted)


def test_the_warning_signal_to_the_batch_shell_is_passed_on_and_requeues(
    slurm: Cluster, uninterrupted: Run, warned_batch: Run
) -> None:
    check_requeued_and_resumed(slurm, warned_batch, uninterrupted)
