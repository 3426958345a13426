"""The documented hook order on 1 and 2 real processes: an uninterrupted run, and a run killed
with SIGKILL at step 7, then resumed from step 6's checkpoint in the middle of an epoch."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.trainer._hook_spec import documented

from ._launch import torchrun

pytestmark = pytest.mark.distributed
SHAPE = {"epochs": 2, "batches": 4, "evaluate_every": 3, "checkpoint_every": 2}


def hooks(out: Path, mode: str, rank: int) -> list[str]:
    return (out / f"hooks_{mode}_rank{rank}.txt").read_text().splitlines()


@pytest.mark.parametrize("nproc", [1, 2])
def test_hooks_follow_the_documented_order_across_a_kill(tmp_path: Path, nproc: int) -> None:
    # Batches of 16 from 128 samples: 8 steps an epoch on 1 process, 4 on each of 2.
    expected = documented(**{**SHAPE, "batches": 8 // nproc})
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    # One launch trains the uninterrupted run, then the run it kills: a launch costs most in
    # its processes importing torch and Accelerate, not in what they train.
    with pytest.raises(AssertionError, match="exited"):
        torchrun("hooks_worker.py", nproc, str(whole), str(cut), "--kill-at-step", "7")
    for rank in range(nproc):
        assert hooks(whole, "run", rank) == expected

    torchrun("hooks_worker.py", nproc, str(cut))
    for rank in range(nproc):
        killed, resumed = hooks(cut, "killed", rank), hooks(cut, "run", rank)
        assert killed[-1] == "on_after_training_step"  # the kill left no hook after it
        last_checkpoint = len(killed) - 1 - killed[::-1].index("on_save_checkpoint")
        assert resumed[:3] == ["on_fit_start", "on_resume", "on_before_training_step"]
        assert killed[: last_checkpoint + 1] + resumed[2:] == expected
