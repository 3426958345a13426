"""A checkpoint made by two processes is refused, with both world sizes named, by one."""

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


def test_a_two_process_checkpoint_is_refused_on_one_process(tmp_path: Path) -> None:
    # The worker checkpoints every 3 optimizer steps; killed after step 4, it leaves one.
    died = run([
        sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2",
        f"--master_port={free_port()}", "--max-restarts=0", WORKER, str(tmp_path),
        "--kill-at-step", "4",
    ])  # fmt: skip
    assert died.returncode != 0
    checkpoints = sorted((tmp_path / "run" / "checkpoints").glob("checkpoint_*"))
    assert [path.name for path in checkpoints] == ["checkpoint_000001"]

    refused = run([sys.executable, WORKER, str(tmp_path)])
    assert refused.returncode != 0
    assert "CheckpointError" in refused.stderr
    assert "was made on 2 processes, and this run has 1; " in refused.stderr
    assert "position within the epoch" in refused.stderr  # killed after step 4, mid-epoch
    assert "pass resume=False to start afresh in this one" in refused.stderr
    assert not list(tmp_path.glob("final_rank*.pt"))
    assert sorted((tmp_path / "run" / "checkpoints").glob("checkpoint_*")) == checkpoints
