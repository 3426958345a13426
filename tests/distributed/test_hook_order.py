"""The documented hook order on 2 real processes: an uninterrupted run, and a run cut off at
step 7 then resumed from step 6's checkpoint in the middle of epoch 1."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.trainer._hook_spec import documented

from ._launch import torchrun

pytestmark = pytest.mark.distributed
SHAPE = {"epochs": 2, "batches": 4, "evaluate_every": 3, "checkpoint_every": 2}


def hooks(out: Path, mode: str, rank: int) -> list[str]:
    return list(json.loads((out / f"hooks_{mode}_rank{rank}.json").read_text()))


def test_hooks_on_two_processes_follow_the_documented_order(tmp_path: Path) -> None:
    expected = documented(**SHAPE)
    torchrun("hooks_worker.py", 2, str(tmp_path / "whole"))
    for rank in (0, 1):
        assert hooks(tmp_path / "whole", "run", rank) == expected

    cut = tmp_path / "cut"
    with pytest.raises(AssertionError, match="exited"):
        torchrun("hooks_worker.py", 2, str(cut), "--fail-at-step", "7")
    torchrun("hooks_worker.py", 2, str(cut))
    for rank in (0, 1):
        killed, resumed = hooks(cut, "killed", rank), hooks(cut, "run", rank)
        assert killed[-1] == "on_runtime_error"
        last_checkpoint = len(killed) - 1 - killed[::-1].index("on_save_checkpoint")
        assert resumed[:3] == ["on_fit_start", "on_resume", "on_before_training_step"]
        assert killed[: last_checkpoint + 1] + resumed[2:] == expected
