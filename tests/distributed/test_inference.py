"""Trainer.evaluate and Trainer.predict through torchrun on 1, 2 and 3 CPU processes, with sets
whose batches do not divide among them: each sample counts once, and the result is the
one-process result (counts to the bit, float sums within 1e-12 relative; predictions to the
bit, in dataset order)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from ._launch import read_ranks, torchrun

pytestmark = pytest.mark.distributed

WORLDS = (1, 2, 3)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[int, list[dict[str, Any]]]:
    """Each world size's records, one per process; one launch per world size."""
    records = {}
    for world in WORLDS:
        out = tmp_path_factory.mktemp(f"world{world}")
        torchrun("inference_worker.py", world, str(out), timeout=240)
        records[world] = read_ranks(out, world)
    return records


def values(record: dict[str, Any]) -> dict[str, dict[str, float]]:
    return {
        key: {name: float.fromhex(value) for name, value in result.items()}
        for key, result in record["results"].items()
    }


@pytest.mark.parametrize("world", [2, 3])
def test_evaluate_equals_the_one_process_result(
    runs: dict[int, list[dict[str, Any]]], world: int
) -> None:
    alone = values(runs[1][0])
    assert set(alone) == {"a", "b"}
    assert set(alone["a"]) == {"loss", "accuracy", "mse"}
    for record in runs[world]:
        assert record["world"] == world
        found = values(record)
        for key, result in alone.items():
            # Accuracy is a ratio of counts: equal to the bit.
            assert found[key]["accuracy"] == result["accuracy"]
            for name in ("loss", "mse"):
                assert math.isclose(found[key][name], result[name], rel_tol=1e-12), (key, name)


def test_predict_returns_every_sample_once_in_dataset_order(
    runs: dict[int, list[dict[str, Any]]],
) -> None:
    alone = runs[1][0]["predictions"]
    assert alone["index"] == list(range(23))
    assert [len(row) for row in alone["ragged"]] == [1 + i % 3 for i in range(23)]
    for world in WORLDS:
        for record in runs[world]:
            # On every process, the same outputs, bit for bit.
            assert record["predictions"] == alone, (world, record["world"])


def test_the_folder_form_loads_back_to_the_same_outputs(
    runs: dict[int, list[dict[str, Any]]],
) -> None:
    for world in WORLDS:
        for record in runs[world]:
            assert record["loaded_equal"] is True
            # Every process wrote shards of its own, and the 1-process run more than one.
            assert record["shards"] >= max(world, 2)


def test_evaluate_and_predict_leave_no_process_group_behind(
    runs: dict[int, list[dict[str, Any]]],
) -> None:
    assert all(not record["group_after"] for world in WORLDS for record in runs[world])
