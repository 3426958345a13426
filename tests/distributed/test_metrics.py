"""accmt-metrics on 1, 2 and 3 real processes (torchrun, gloo, Accelerate's sharding).

One torchrun launch per world size (the worker's Accelerator(cpu=True) joins its gloo group)
runs tests/distributed/workers/metrics_worker.py, which feeds every built-in and two
torchmetrics adapters over an uneven dataset, dealt in every way Accelerate deals it; here the
same metrics are fed the same samples in this one process, and every process must have got
this single-process result: ratios of counts to the bit, float64 sums to 1e-12 relative.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from torch.utils.data import BatchSampler, DataLoader, SequentialSampler

from accmt_metrics import Accuracy
from accmt_metrics._order import rows_before

from ._launch import read_ranks, torchrun
from .workers import metrics_worker as worker

pytestmark = pytest.mark.distributed

# Results that are ratios of whole counts must be equal to the bit.
COUNTED = {
    "accuracy",
    "top2_accuracy",
    "precision_macro",
    "precision_micro",
    "recall_macro",
    "recall_micro",
    "f1_macro",
    "f1_micro",
    "f1_macro_7_classes",
    "torchmetrics_accuracy",
}
# Results that add up floats in float64: each process sums its own batches and the processes'
# sums are then added, so the additions are associated differently from one process's (and
# through split_batches or the DistributedSampler the batches are composed differently too).
# That changes only the last bits.
SUMMED = {"mse": 1e-12, "mae": 1e-12, "loss": 1e-12, "perplexity": 1e-12}
# torchmetrics keeps MeanSquaredError's sum in float32 and adds the processes' partial sums.
SUMMED_FLOAT32 = {"torchmetrics_mse": 1e-6}


def single_process() -> dict[str, dict[str, float]]:
    metrics = worker.make_metrics(num_samples=None)
    for batch in DataLoader(worker.make_dataset(), batch_size=worker.BATCH_SIZE):
        worker.feed(metrics, batch)
    return worker.compute_all(metrics)


def check_results(found: dict[str, dict[str, float]], expected: dict[str, Any]) -> None:
    assert found.keys() == expected.keys()
    for key, values in expected.items():
        assert found[key].keys() == values.keys(), key
        for name, value in values.items():
            if key in COUNTED:
                assert found[key][name] == value, key
            else:
                tolerance = SUMMED_FLOAT32.get(key) or SUMMED[name]
                assert math.isclose(found[key][name], value, rel_tol=tolerance), key


@pytest.fixture(scope="module")
def expected() -> dict[str, dict[str, float]]:
    return single_process()


@pytest.mark.parametrize("nproc", [1, 2, 3])
def test_every_process_gets_the_single_process_result(
    tmp_path: Path, nproc: int, expected: dict[str, dict[str, float]]
) -> None:
    torchrun("metrics_worker.py", nproc, str(tmp_path))
    records = read_ranks(tmp_path, nproc)
    alone = Accuracy()
    alone.add_batch(*worker.ONLY_MAIN_BATCH)
    seen = [record["accelerate"]["seen"] for record in records]
    if nproc > 1:
        # Accelerate padded the last round with repeated samples, which the metrics dropped.
        assert sum(len(indices) for indices in seen) > worker.DATASET_SIZE
    assert sorted(set().union(*seen)) == list(range(worker.DATASET_SIZE))
    for key in worker.VARIANTS:
        dealt = [record["variants"][key]["seen"] for record in records]
        assert sorted(set().union(*dealt)) == list(range(worker.DATASET_SIZE)), key
    for record in records:
        assert record["world"] == nproc
        assert record["accelerate"]["accelerate_state"] == "MULTI_CPU"
        check_results(record["accelerate"]["results"], expected)
        check_results(record["sampler"]["results"], expected)
        for key in worker.VARIANTS:
            check_results(record["variants"][key]["results"], expected)
            assert record["variants"][key]["results"] == records[0]["variants"][key]["results"]
        # compute() twice gives the same; every process gets the very same numbers.
        assert record["accelerate"]["again"] == record["accelerate"]["results"]
        assert record["accelerate"]["results"] == records[0]["accelerate"]["results"]
        assert record["sampler"]["results"] == records[0]["sampler"]["results"]
        # A process that added nothing still takes part; with nothing anywhere, all raise.
        assert record["edge"]["only_main"] == alone.compute()
        assert record["edge"]["empty_error"] == (
            "F1('f1'): compute() was called before any sample was added"
        )
        assert "Accuracy('accuracy'): num_samples=6 but" in record["edge"]["misdealt_error"]
        assert record["edge"] == records[0]["edge"]


def kept_by_the_rule(dealt: list[list[list[int]]], size: int) -> list[int]:
    """The dataset indices the metrics keep, each process applying ``rows_before`` batch by
    batch to what it was dealt; asserting each batch keeps its leading real rows only."""
    world = len(dealt)
    kept: list[int] = []
    for process, batches in enumerate(dealt):
        added = 0
        for indices in batches:
            real = rows_before(size, added, len(indices), process, world)
            kept += indices[:real]
            added += len(indices)
    return kept


@pytest.mark.parametrize("split_batches", [False, True])
@pytest.mark.parametrize("even_batches", [True, False])
def test_the_rule_keeps_each_sample_once_as_accelerate_deals_them(
    split_batches: bool, even_batches: bool
) -> None:
    from accelerate.data_loader import BatchSamplerShard

    for size in range(1, 40):
        for batch_size in (1, 3, 4):
            for world in (2, 3):
                # With split_batches a global batch is cut into one slice per process.
                global_batch = batch_size * world if split_batches else batch_size
                sampler = BatchSampler(SequentialSampler(range(size)), global_batch, False)
                dealt = [
                    list(
                        BatchSamplerShard(
                            sampler,
                            num_processes=world,
                            process_index=process,
                            split_batches=split_batches,
                            even_batches=even_batches,
                        )
                    )
                    for process in range(world)
                ]
                kept = kept_by_the_rule(dealt, size)
                assert sorted(kept) == list(range(size)), (size, batch_size, world)


@pytest.mark.parametrize("split_batches", [False, True])
def test_the_rule_keeps_each_sample_once_from_a_sharded_stream(split_batches: bool) -> None:
    from accelerate.data_loader import IterableDatasetShard

    for size in range(1, 40):
        for batch_size in (1, 3, 4):
            for world in (2, 3):
                global_batch = batch_size * world if split_batches else batch_size
                dealt = []
                for process in range(world):
                    stream = list(
                        IterableDatasetShard(
                            range(size),  # type: ignore[arg-type]
                            batch_size=global_batch,
                            num_processes=world,
                            process_index=process,
                            split_batches=split_batches,
                        )
                    )
                    # The DataLoader over the shard batches it by the per-process batch size.
                    dealt.append(
                        [stream[i : i + batch_size] for i in range(0, len(stream), batch_size)]
                    )
                kept = kept_by_the_rule(dealt, size)
                assert sorted(kept) == list(range(size)), (size, batch_size, world)
