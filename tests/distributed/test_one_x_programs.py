"""accmt 1.x-style training scripts run unchanged through 'accmt launch', on 1 and on 2
processes."""

from __future__ import annotations

from pathlib import Path

import pytest

from ._launch import WORKERS, read_ranks
from .test_cli_launch import accmt

pytestmark = pytest.mark.distributed


@pytest.mark.parametrize("nproc", [1, 2])
def test_a_1x_classifier_with_a_1x_metric(tmp_path: Path, nproc: int) -> None:
    done = accmt("launch", "--cpu", "-N", str(nproc), str(WORKERS / "one_x_classifier.py"),
                 str(tmp_path))  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    records = read_ranks(tmp_path, nproc)
    for record in records:
        assert (record["world"], record["finished"]) == (nproc, True)
        found = record["metrics"]["validation"]
        # The 1.x metric saw every validation sample once, padding dropped: its value is the
        # 1.x math over the whole set, to the bit, and the same on every process.
        assert found["accuracy"] == record["by_hand"]
        assert found["accuracy"] > 0.8
        assert record["metrics"] == records[0]["metrics"]
