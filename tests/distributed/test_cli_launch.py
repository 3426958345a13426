"""``accmt launch`` starts real jobs: ``--cpu -N 2`` is 2 processes of one gloo job (where
``accelerate launch --cpu --num_processes 2`` would start one), the script gets its arguments,
and a failing script's exit status comes back."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ._launch import WORKERS, read_ranks

pytestmark = pytest.mark.distributed

# The console script that installing the accmt package made, next to this Python.
ACCMT = str(Path(sys.executable).parent / "accmt")


def accmt(*argv: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "PYTHONUNBUFFERED": "1"}
    environment.pop("OMP_NUM_THREADS", None)  # accmt launch sets it per process
    return subprocess.run(
        [ACCMT, *argv], capture_output=True, text=True, timeout=300, env=environment
    )


def test_cpu_n_2_runs_two_processes_of_one_gloo_job(tmp_path: Path) -> None:
    done = accmt(
        "launch",
        "--cpu",
        "-N",
        "2",
        str(WORKERS / "launch_worker.py"),
        str(tmp_path),
        "--epochs",
        "3",
    )
    assert done.returncode == 0, done.stderr[-4000:]
    records = read_ranks(tmp_path, 2)
    assert sorted(record["rank"] for record in records) == [0, 1]
    for record in records:
        assert record["world"] == 2
        assert record["backend"] == "gloo"
        assert record["device"].startswith("cpu")
        assert record["sum_of_ranks_plus_one"] == 3.0  # an all_reduce across both
        assert record["args"] == ["--epochs", "3"]
        assert record["omp_num_threads"] == str(max((os.cpu_count() or 1) // 2, 1))


def test_a_failing_script_fails_the_command_with_its_status(tmp_path: Path) -> None:
    done = accmt(
        "launch", "--cpu", "-N", "2", str(WORKERS / "launch_worker.py"), str(tmp_path), "--fail"
    )
    assert done.returncode == 3
    assert not list(tmp_path.iterdir())
