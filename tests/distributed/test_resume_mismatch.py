"""A checkpoint made by one process within an epoch, at a moment two processes cannot split into
whole accumulation windows, is refused by two before anything is written, with what to do."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ._launch import WORKERS, free_port

pytestmark = pytest.mark.distributed

WORKER = str(WORKERS / "resume_worker.py")


def run(command: list[str]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)


def test_a_moment_two_processes_cannot_split_is_refused_by_two(tmp_path: Path) -> None:
    # The worker checkpoints every 3 optimizer steps (accumulation 2); killed after step 4, it
    # leaves one, after 6 batches of epoch 1: 3 on each of two processes, not whole windows.
    died = run([sys.executable, WORKER, str(tmp_path), "--kill-at-step", "4"])
    assert died.returncode != 0
    checkpoints = sorted((tmp_path / "run" / "checkpoints").glob("checkpoint_*"))
    assert [path.name for path in checkpoints] == ["checkpoint_000001"]

    refused = run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc_per_node=2",
            f"--master_port={free_port()}",
            "--max-restarts=0",
            WORKER,
            str(tmp_path),
        ]
    )
    assert refused.returncode != 0
    assert "CheckpointError" in refused.stderr
    assert "was made on 1 process, and this run has 2; " in refused.stderr
    assert "it was made at batch 6 of epoch 1 (step 3)" in refused.stderr
    assert "on 2 processes that is 3 batches each, not a whole number" in refused.stderr
    assert "resume it on a number of processes that splits it so: 1, 3" in refused.stderr
    assert "resume from a checkpoint made at an epoch's end" in refused.stderr
    assert "pass resume=False to start afresh in this one" in refused.stderr
    assert not list(tmp_path.glob("final_rank*.pt"))
    assert sorted((tmp_path / "run" / "checkpoints").glob("checkpoint_*")) == checkpoints
