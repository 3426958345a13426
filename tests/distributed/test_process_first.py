"""``with main_process_first():`` as the README shows it, first thing in a script started by a
real launcher (torchrun, ``accmt launch --cpu -N 2``): before any Accelerator or group exists,
the block makes the job's gloo group from the launcher's environment, the main process goes
first, and the Trainer made afterwards trains on that group as one job of 2 processes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ._launch import WORKERS, read_ranks, torchrun

pytestmark = pytest.mark.distributed

ACCMT = str(Path(sys.executable).parent / "accmt")


def check(out: Path) -> None:
    records = read_ranks(out, 2)
    for rank, record in enumerate(records):
        assert record["torch_before"] is False  # nothing but accmt_decorators was imported
        assert record["seen"] == "made by the main process"
        assert record["process"] == {
            "process_index": rank,
            "local_process_index": rank,
            "num_processes": 2,
            "num_local_processes": 2,
            "source": "torch.distributed",
        }
        assert record["backend"] == "gloo"
        # 32 samples, 8 per batch on each of 2 processes: 2 steps, both processes one job.
        assert (record["steps"], record["processes"]) == (2, 2)
    # The other process came into the block only once the main process had left it.
    assert records[1]["entered"] >= records[0]["left"]


def test_under_torchrun(tmp_path: Path) -> None:
    torchrun("process_first_worker.py", 2, str(tmp_path))
    check(tmp_path)


def test_under_accmt_launch_cpu(tmp_path: Path) -> None:
    environment = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1"}
    command = [
        ACCMT,
        "launch",
        "--cpu",
        "-N",
        "2",
        str(WORKERS / "process_first_worker.py"),
        str(tmp_path),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, env=environment)
    assert done.returncode == 0, done.stderr[-4000:]
    check(tmp_path)
