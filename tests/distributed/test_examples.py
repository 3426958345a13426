"""The digits example runs unchanged on 2 CPU processes through ``accelerate launch``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from accmt_trainer import load_predictions

from ._launch import free_port

pytestmark = pytest.mark.distributed

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "train_digits.py"
sys.path.insert(0, str(EXAMPLE.parent))
from train_digits import split_digits  # noqa: E402


def test_digits_example_under_accelerate_launch(tmp_path: Path) -> None:
    command = [
        sys.executable,
        "-m",
        "accelerate.commands.launch",
        "--multi_gpu",
        "--num_processes=2",
        "--num_machines=1",
        f"--main_process_port={free_port()}",
        str(EXAMPLE),
        "--epochs",
        "3",
        "--output",
        str(tmp_path),
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-4000:]
    # Reported once, by the main process, for a run over both processes' shares.
    assert done.stdout.count("validation accuracy:") == 1, done.stdout
    # The Trainer's own lines, on stderr, from the main process alone: how the run starts, and
    # one line per evaluation.
    assert done.stderr.count(f"starting afresh in {tmp_path}: 3 epochs") == 1, done.stderr
    assert done.stderr.count(": validation loss=") == 3, done.stderr
    # 1257 training samples dealt in batches of 32 to 2 processes: ceil(1257 / 64) = 20 steps
    # per epoch on each, the same steps on both.
    assert "optimizer steps: 60" in done.stdout
    assert (tmp_path / "accuracy" / "model.safetensors").is_file()
    assert list((tmp_path / "checkpoints").glob("checkpoint_*/manifest.json"))
    # The test split's 270 predictions, each once, in its order, from both processes' shares.
    assert done.stdout.count("test accuracy of the best model by accuracy:") == 1
    predictions = load_predictions(tmp_path / "predictions")
    _, _, test = split_digits(0.7, 0.15, 0.15)
    accuracy = (predictions["label"] == test.tensors[1]).double().mean().item()
    assert f"test accuracy of the best model by accuracy: {accuracy:.4f}" in done.stdout
