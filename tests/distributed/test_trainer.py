"""Trainer.fit on 2 real processes: gradients are averaged on every optimizer step."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from ._launch import WORKERS, torchrun

pytestmark = pytest.mark.distributed


def single_process(out: Path, batch_size: int, accumulation: int) -> dict[str, object]:
    out.mkdir()
    subprocess.run(
        [sys.executable, str(WORKERS / "trainer_worker.py"), str(out), str(batch_size),
         str(accumulation)],
        check=True, capture_output=True,
    )  # fmt: skip
    loaded: dict[str, object] = torch.load(out / "rank0.pt")
    return loaded


@pytest.mark.parametrize("accumulation", [1, 5])
def test_two_processes_match_each_other_and_one_process(tmp_path: Path, accumulation: int) -> None:
    torchrun("trainer_worker.py", 2, str(tmp_path), "8", str(accumulation))
    ranks = [torch.load(tmp_path / f"rank{r}.pt") for r in range(2)]
    reference = single_process(tmp_path / "single", 16, accumulation)
    # 192 samples, 8 per process per batch: 12 batches per process per epoch.
    assert ranks[0]["global_step"] == ranks[1]["global_step"] == 2 * -(-12 // accumulation)
    assert reference["global_step"] == ranks[0]["global_step"]
    for name, weight in ranks[0]["weights"].items():
        # Identical on both processes: every optimizer step averaged the same gradients.
        assert torch.equal(weight, ranks[1]["weights"][name]), name
        # The same run as one process over the same global batches, up to float reassociation
        # of the gradient average.
        torch.testing.assert_close(weight, reference["weights"][name], rtol=1e-5, atol=1e-6)
