"""The digits example runs unchanged on 2 CPU processes through ``accelerate launch``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ._launch import free_port

pytestmark = pytest.mark.distributed

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "train_digits.py"


def test_digits_example_under_accelerate_launch(tmp_path: Path) -> None:
    command = [
        sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes=2",
        "--num_machines=1", f"--main_process_port={free_port()}", str(EXAMPLE),
        "--epochs", "3", "--output", str(tmp_path),
    ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-4000:]
    # Reported once, by the main process, for a run over both processes' shares.
    assert done.stdout.count("validation accuracy:") == 1, done.stdout
    # 1437 training samples dealt in batches of 32 to 2 processes: ceil(1437 / 64) = 23 steps
    # per epoch on each, the same steps on both.
    assert "optimizer steps: 69" in done.stdout
    assert (tmp_path / "accuracy" / "model.safetensors").is_file()
    assert list((tmp_path / "checkpoints").glob("checkpoint_*/manifest.json"))
