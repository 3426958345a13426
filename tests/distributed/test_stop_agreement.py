"""One stop, agreed by all, through torchrun on 2 processes: a stop asked on rank 1 alone (a
callback's request_stop, or SIGTERM sent to rank 1's process alone) ends both ranks at the same
optimizer step, within 60 s, with a checkpoint there that resumes to the uninterrupted run's
weights bit for bit. (Before, rank 0 went on into the next step's all-reduce and both hung.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from ._launch import torchrun

pytestmark = pytest.mark.distributed


def load(out: Path, name: str) -> list[dict[str, Any]]:
    return [torch.load(out / f"{name}_rank{rank}.pt") for rank in range(2)]


@pytest.mark.parametrize("how", ["callback", "sigterm"])
def test_a_stop_asked_on_one_rank_stops_both_at_the_same_step(tmp_path: Path, how: str) -> None:
    torchrun("stop_worker.py", 2, str(tmp_path), how, timeout=240)
    stopped = load(tmp_path, "stopped")
    # Asked after step 5 on rank 1 alone; both stop there.
    assert [record["global_step"] for record in stopped] == [5, 5]
    assert [record["finished"] for record in stopped] == [False, False]
    assert all(record["reason"] for record in stopped)  # rank 0 was told to stop too
    assert all("checkpoint_000002" in record["checkpoints"] for record in stopped)
    asked = [record["waited"] for record in stopped if record["waited"] is not None]
    assert len(asked) == 1
    assert asked[0] < 60
    whole, resumed = load(tmp_path, "whole"), load(tmp_path, "resumed")
    for rank in range(2):
        assert resumed[rank]["global_step"] == whole[rank]["global_step"] == 12
        for name, weight in whole[rank]["weights"].items():
            assert torch.equal(weight, resumed[rank]["weights"][name]), (how, rank, name)
