"""The job requeues itself: after a stop that SLURM's warning signal asked for is checkpointed,
the main process runs ``scontrol requeue`` on its job, and the requeued job resumes from that
checkpoint.

``scontrol`` is the program of that name on PATH, run with a fixed argument list (nothing read
from a file decides what runs). Whether the job may be requeued is SLURM's to say: a job
submitted with ``--no-requeue``, an interactive one, or a cluster that forbids it makes
``scontrol`` fail, and its answer is said in one line; the stop is never undone by it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping

from ..console import logger


def job_to_requeue(environ: Mapping[str, str] | None = None) -> str | None:
    """The SLURM job this process belongs to, as ``scontrol`` names it: ``<array job id>_<task
    id>`` for a task of a job array (its own SLURM_JOB_ID alone would name the array's first
    job to some commands), else SLURM_JOB_ID; None outside SLURM."""
    environ = os.environ if environ is None else environ
    array, task = environ.get("SLURM_ARRAY_JOB_ID"), environ.get("SLURM_ARRAY_TASK_ID")
    if array and task:
        return f"{array}_{task}"
    return environ.get("SLURM_JOB_ID") or None


def requeue(job: str, checkpoint: str) -> bool:
    """``scontrol requeue job``, once; a line says what came of it. Whether SLURM took it."""
    program = shutil.which("scontrol")
    if program is None:
        logger.error(
            "SLURM job %s was not requeued: no scontrol on PATH; it resumes from %s when "
            "submitted again",
            job,
            checkpoint,
        )
        return False
    try:
        done = subprocess.run(
            [program, "requeue", job], capture_output=True, text=True, timeout=120, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        logger.error("SLURM job %s was not requeued: %s %s", job, program, error)
        return False
    if done.returncode != 0:
        answer = " ".join((done.stderr or done.stdout).split()) or f"exit status {done.returncode}"
        logger.error(
            "SLURM job %s was not requeued: scontrol requeue said: %s (submit it with "
            "--requeue; it resumes from %s when submitted again)",
            job,
            answer,
            checkpoint,
        )
        return False
    logger.warning("requeued SLURM job %s: it resumes from %s", job, checkpoint)
    return True
