"""Fit's own validation is exact on N processes: through torchrun on 1, 2 and 3 processes, the
loss and every metric fit records over 101 samples (and over a set of 5, smaller than one
batch per process) equal the one-process values, and Trainer.evaluate's on the same weights:
no sample repeated to even out the processes' batches, none dropped."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ._launch import torchrun


def recorded(tmp_path: Path, processes: int) -> dict[str, Any]:
    out = tmp_path / f"validation{processes}.json"
    torchrun("fit_validation_worker.py", processes, str(out))
    found: dict[str, Any] = json.loads(out.read_text())
    return found


def test_fit_records_the_one_process_values_on_2_and_3_processes(tmp_path: Path) -> None:
    one = recorded(tmp_path, 1)
    for key, values in one["fit"].items():
        assert values == pytest.approx(one["evaluate"][key], rel=1e-12), key
    for processes in (2, 3):
        found = recorded(tmp_path, processes)
        assert set(found["fit"]) == {"validation", "small"}
        for key, values in one["fit"].items():
            assert found["fit"][key] == pytest.approx(values, rel=1e-6), (processes, key)
            assert found["evaluate"][key] == pytest.approx(values, rel=1e-6), (processes, key)
