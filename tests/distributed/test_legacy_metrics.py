"""accmt 1.x-style metrics on 2 real processes (torchrun, gloo): every process gets exactly
the single-process result over the same samples, Accelerate's padding dropped.

The worker (tests/distributed/workers/legacy_metrics_worker.py) feeds the metrics through
Accelerate's prepared DataLoader; here the same metrics are fed the same batches in this one
process.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from torch.utils.data import DataLoader

from ._launch import read_ranks, torchrun
from .workers import legacy_metrics_worker as worker

pytestmark = pytest.mark.distributed


def single_process() -> dict[str, float]:
    metrics = worker.make_metrics(num_samples=None)
    for batch in DataLoader(worker.make_dataset(), batch_size=worker.BATCH_SIZE):
        worker.feed(metrics, batch)
    return worker.compute_all(metrics)


def test_two_processes_get_the_single_process_result_to_the_bit(tmp_path: Path) -> None:
    torchrun("legacy_metrics_worker.py", 2, str(tmp_path))
    records = read_ranks(tmp_path, 2)
    expected = single_process()
    assert expected["count"] == worker.DATASET_SIZE
    seen = [record["seen"] for record in records]
    # Accelerate repeated samples to even out the last round; the metrics dropped them.
    assert sum(len(indices) for indices in seen) > worker.DATASET_SIZE
    for record in records:
        assert (record["world"], record["backend"]) == (2, "gloo")
        # The same samples, in the same order, through the same float32 math: equal bits.
        assert record["results"] == expected
