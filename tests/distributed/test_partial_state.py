"""A program that made Accelerate's state before the Trainer, through torchrun on 2 CPU
processes: ``PartialState()`` without ``cpu=True`` says one process while the group has two,
which fit names (cpu=True is the fix) before anything is written; with ``cpu=True`` fit trains
on both processes as one job, and leaves each process's module with the user's own model (not
DDP's wrapper)."""

from __future__ import annotations

import json
from pathlib import Path

from ._launch import torchrun


def records(out: Path) -> list[dict[str, object]]:
    return [json.loads((out / f"rank{rank}.json").read_text()) for rank in range(2)]


def test_a_state_that_disagrees_with_the_group_is_named_before_anything_is_written(
    tmp_path: Path,
) -> None:
    torchrun("partial_state_worker.py", 2, str(tmp_path), "plain")
    for record in records(tmp_path):
        assert "torch.distributed's group has 2" in str(record["error"])
        assert "cpu=True" in str(record["error"])
        assert record["written"] is False


def test_with_cpu_true_both_processes_train_as_one_job(tmp_path: Path) -> None:
    torchrun("partial_state_worker.py", 2, str(tmp_path), "cpu")
    found = [(r["steps"], r["processes"], r["model"]) for r in records(tmp_path)]
    assert found == [(2, 2, "Linear"), (2, 2, "Linear")]
