"""``accmt launch`` and signals, on a real 2-process CPU launch each: a signal sent to the
launcher alone reaches both workers, which stop at the same step with a complete checkpoint;
the launcher exits only after them (no worker outlives it) with status 75, and SLURM's warning
signal (SIGUSR1) makes the main process requeue the job once, after the checkpoint is durable.
SIGTERM twice, 50 ms apart (as slurmstepd and a forwarding launcher may send it), still stops
with the checkpoint. ``scontrol`` is a stand-in that records its calls (tests/trainer/
_fake_scontrol.py); the real-SLURM tests run the real one."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.trainer._fake_scontrol import calls, fake_scontrol, on_path

from ._launch import WORKERS

pytestmark = pytest.mark.distributed

ACCMT = str(Path(sys.executable).parent / "accmt")
# A job of one task on one node, as 'srun accmt launch' (or a batch script) runs it; a task of
# array job 77.
SLURM = {
    "SLURM_JOB_ID": "78",
    "SLURM_ARRAY_JOB_ID": "77",
    "SLURM_ARRAY_TASK_ID": "2",
    "SLURM_NTASKS": "1",
    "SLURM_PROCID": "0",
    "SLURM_LOCALID": "0",
    "SLURM_NNODES": "1",
    "SLURM_NODEID": "0",
}


def launch_and_signal(out: Path, *signals: signal.Signals) -> tuple[int, str]:
    """``accmt launch --cpu -N 2`` of the signal worker, under SLURM's variables with the fake
    scontrol; once both workers are training, ``signals`` to the launcher alone, 50 ms apart.
    Its exit status and output, once it exited."""
    environment = {**os.environ, **SLURM, "PYTHONUNBUFFERED": "1"}
    environment["PATH"] = on_path(fake_scontrol(out, out / "run" / "checkpoints"))
    environment.pop("OMP_NUM_THREADS", None)
    command = [ACCMT, "launch", "--cpu", "-N", "2", str(WORKERS / "signal_worker.py"), str(out)]
    launcher = subprocess.Popen(
        command, env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        deadline = time.monotonic() + 180
        while not all((out / f"ready_rank{rank}").exists() for rank in range(2)):
            assert launcher.poll() is None, launcher.communicate()[0][-4000:]
            assert time.monotonic() < deadline, "the workers never got going"
            time.sleep(0.1)
        for sig in signals:
            launcher.send_signal(sig)
            time.sleep(0.05)
        output, _ = launcher.communicate(timeout=120)
    finally:
        if launcher.poll() is None:
            launcher.kill()
    return launcher.returncode, output


def check_stopped(out: Path, status: int, output: str, name: str) -> dict[str, Any]:
    """Both workers stopped at one step with a complete checkpoint there, both gone when the
    launcher exited with 75; what rank 0's fit returned."""
    assert status == 75, output[-4000:]
    pids = [int((out / f"pid_rank{rank}").read_text()) for rank in range(2)]
    assert not [pid for pid in pids if psutil.pid_exists(pid)], "a worker outlived the launcher"
    results = [json.loads((out / f"result_rank{rank}.json").read_text()) for rank in range(2)]
    assert [r["stop_signal"] for r in results] == [name, name]
    assert [r["exit_status"] for r in results] == [75, 75]
    assert not any(r["finished"] for r in results)
    assert results[0]["global_step"] == results[1]["global_step"] < 50 * 4
    root = out / "run" / "checkpoints"
    latest = root / json.loads((root / "latest.json").read_text())["latest"]
    assert (latest / "manifest.json").exists()
    state = json.loads((latest / "state.json").read_text())
    assert (state["global_step"], state["stop_signal"]) == (results[0]["global_step"], name)
    return results[0]


def test_the_warning_signal_to_the_launcher_stops_checkpoints_and_requeues_once(
    tmp_path: Path,
) -> None:
    status, output = launch_and_signal(tmp_path, signal.SIGUSR1)
    check_stopped(tmp_path, status, output, "SIGUSR1")
    # Once, by rank 0 (whose pid is the caller), for the array task, the checkpoint in place.
    rank0 = int((tmp_path / "pid_rank0").read_text())
    root = tmp_path / "run" / "checkpoints"
    newest = json.loads((root / "latest.json").read_text())["latest"]
    assert calls(tmp_path) == [
        {"args": ["requeue", "77_2"], "caller": rank0, "latest": newest, "manifest": True}
    ]


def test_sigterm_twice_to_the_launcher_stops_once_with_its_checkpoint(tmp_path: Path) -> None:
    status, output = launch_and_signal(tmp_path, signal.SIGTERM, signal.SIGTERM)
    check_stopped(tmp_path, status, output, "SIGTERM")
    assert "received SIGTERM again: ignored" in output
    assert calls(tmp_path) == []  # SIGTERM is not the requeue signal
