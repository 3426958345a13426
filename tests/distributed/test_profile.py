"""``profile_steps`` and items per second on 2 processes through torchrun: each process writes
its own trace of the window's optimizer steps, and ``train/items_per_second`` counts the items
of both. (One process: tests/trainer/test_profile.py and test_throughput.py.)"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from ._launch import torchrun

WORKERS = Path(__file__).parents[1] / "trainer" / "workers"
sys.path.insert(0, str(WORKERS))
from profiled_run import BATCH, optimizer_steps_in, traces  # noqa: E402


def test_every_process_traces_the_window_and_the_items_of_both_are_counted(
    tmp_path: Path,
) -> None:
    # 64 samples in batches of 8 on 2 processes: 4 optimizer steps; steps 2 and 3 profiled.
    torchrun(str(WORKERS / "profiled_run.py"), 2, str(tmp_path), "1", "3")
    found = traces(tmp_path)
    assert sorted(trace.name.split(".")[0] for trace in found) == ["process_0", "process_1"]
    for trace in found:
        assert optimizer_steps_in(trace) == {
            "optimizer": 2,
            "marked": ["ProfilerStep#0", "ProfilerStep#1"],
        }
    items = [json.loads((tmp_path / f"items_{rank}.json").read_text()) for rank in (0, 1)]
    logs = json.loads((tmp_path / "logs.json").read_text())
    assert [log["step"] for log in logs] == [2, 4]
    for window, log in enumerate(logs):
        counted = sum(sum(mine[2 * window : 2 * window + 2]) for mine in items)
        ratio = log["train/items_per_second"] / log["train/samples_per_second"]
        assert ratio == pytest.approx(counted / (2 * 2 * BATCH), rel=1e-9)
