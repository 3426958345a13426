"""Trainer.fit on 2 real processes: gradients are averaged on every optimizer step."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from ._launch import WORKERS, torchrun

pytestmark = pytest.mark.distributed

ACCUMULATIONS = ["1", "5"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every accumulation trained in one launch on 2 processes (8 samples per process per
    batch) and in one single process (16 per batch), the same global batches: a launch costs
    most in its processes importing torch and Accelerate, not in what they train."""
    out = tmp_path_factory.mktemp("trainer")
    torchrun("trainer_worker.py", 2, str(out / "two"), "8", *ACCUMULATIONS)
    subprocess.run(
        [
            sys.executable,
            str(WORKERS / "trainer_worker.py"),
            str(out / "single"),
            "16",
            *ACCUMULATIONS,
        ],
        check=True,
        capture_output=True,
    )
    return out


@pytest.mark.parametrize("accumulation", [1, 5])
def test_two_processes_match_each_other_and_one_process(runs: Path, accumulation: int) -> None:
    folder = f"accumulation_{accumulation}"
    ranks = [torch.load(runs / "two" / folder / f"rank{r}.pt") for r in range(2)]
    reference = torch.load(runs / "single" / folder / "rank0.pt")
    # 192 samples, 8 per process per batch: 12 batches per process per epoch.
    assert ranks[0]["global_step"] == ranks[1]["global_step"] == 2 * -(-12 // accumulation)
    assert reference["global_step"] == ranks[0]["global_step"]
    for name, weight in ranks[0]["weights"].items():
        # Identical on both processes: every optimizer step averaged the same gradients.
        assert torch.equal(weight, ranks[1]["weights"][name]), name
        # The same run as one process over the same global batches, up to float reassociation
        # of the gradient average.
        torch.testing.assert_close(weight, reference["weights"][name], rtol=1e-5, atol=1e-6)
