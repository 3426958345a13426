"""``srun --ntasks=2 python train.py`` forms one job: two plain ``python`` processes (no
torchrun, no SLURM daemon) given the variables srun gives its tasks, and nothing else of a
launcher's. The Trainer's Accelerator forms the 2-process job from them (one output folder,
the same weights on both, threads from SLURM_CPUS_PER_TASK), and so does ``main_process_first``,
which orders them. (The real SLURM harness runs srun itself.)"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ._launch import WORKERS, free_port, read_ranks

pytestmark = pytest.mark.distributed

LAUNCHERS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def srun_tasks(worker: str, ntasks: int, *args: str, timeout: float = 240) -> int:
    """Start ``ntasks`` tasks of one step on this node as srun would; the job id chosen so that
    the port derived from it (10000 + id % 20000) is a free one."""
    port = free_port()
    job_id = 20000 * 7 + port - 10000
    base = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("SLURM_") and name not in (*LAUNCHERS, "OMP_NUM_THREADS")
    }
    step = {
        "SLURM_JOB_ID": str(job_id),
        "SLURM_STEP_ID": "0",
        "SLURM_NTASKS": str(ntasks),
        "SLURM_NNODES": "1",
        "SLURM_NODEID": "0",
        "SLURM_JOB_NODELIST": "localhost",
        "SLURM_TASKS_PER_NODE": str(ntasks),
        "SLURM_CPUS_PER_TASK": "1",
        "PYTHONUNBUFFERED": "1",
    }
    tasks = [
        subprocess.Popen(
            [sys.executable, str(WORKERS / worker), *args],
            env={**base, **step, "SLURM_PROCID": str(rank), "SLURM_LOCALID": str(rank)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank in range(ntasks)
    ]
    try:
        for task in tasks:
            stdout, stderr = task.communicate(timeout=timeout)
            output = f"{stdout}\n{stderr[-6000:]}"
            assert task.returncode == 0, f"task exited {task.returncode}\n{output}"
    finally:
        for task in tasks:
            if task.poll() is None:
                task.kill()
                task.wait()
    return port


def test_two_srun_tasks_form_one_job(tmp_path: Path) -> None:
    port = srun_tasks("slurm_worker.py", 2, str(tmp_path))
    records = read_ranks(tmp_path, 2)
    for rank, record in enumerate(records):
        assert record["torch_before"] is False  # SLURM's variables read by the standard library
        # accmt-search's link, made before any Trainer: 2 processes, rank 0's value on both.
        assert record["search_link"] == [2, 0]
        assert record["process"] == {
            "process_index": rank,
            "local_process_index": rank,
            "num_processes": 2,
            "num_local_processes": 2,
            "source": "environment",
        }
        # One job of 2 processes: 32 samples, 8 per batch on each, 2 steps.
        assert (record["steps"], record["processes"]) == (2, 2)
        assert record["exported"] == {
            "MASTER_ADDR": "localhost",
            "MASTER_PORT": str(port),
            "RANK": str(rank),
            "WORLD_SIZE": "2",
            "LOCAL_RANK": str(rank),
            "LOCAL_WORLD_SIZE": "2",
            "OMP_NUM_THREADS": "1",
        }
        assert record["threads"] == 1
        assert record["group_left"] is False  # the fit made the group, and tore it down
        # main_process_first formed the job again from SLURM's variables, and ordered it.
        assert record["seen"] == "made by the main process"
        assert record["world_after_barrier"] == 2
        assert record["process_after_barrier"]["source"] == "torch.distributed"
    assert records[0]["weights"] == records[1]["weights"]
    assert records[1]["entered"] >= records[0]["left"]
    assert (tmp_path / "run").is_dir()
