"""Resuming on another number of processes: 2 -> 1 and 1 -> 2 (and 1 -> 2 -> 1), mid-epoch and
from a finished run, through torchrun, with what is exact asserted exactly.

Three launches run every run (see workers/resize_worker.py): one process, then two, then one.
96 samples in batches of 4 make one order of 24 batches an epoch; with accumulation 2 an epoch
is 12 optimizer steps on one process and 6 on two.

- ``x``: one process stops after step 4 (8 batches of epoch 0 read); two processes resume it at
  4 batches each, stop after step 10 (epoch 1, 4 batches each); one process resumes it at 8
  batches and ends it. LinearWithWarmup (a LambdaLR, its length in its rebuilt lambdas).
- ``y``: two processes stop after step 8; one process resumes it. CosineAnnealingLR, whose
  T_max is in its state_dict.
- ``z``: one process stops after step 3 (6 batches read); two processes cannot split 6 batches
  into windows of 2 each, and are refused with what to do; resume=1, the checkpoint it names,
  then resumes.
- ``f``: one process finishes a 1-epoch run; two processes resume it for a second epoch.
"""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file

from ._launch import WORKERS, free_port

pytestmark = pytest.mark.distributed

WORKER = str(WORKERS / "resize_worker.py")
LR = 0.01
WARMUP = 2
LENGTHS = {"T_max"}  # what a resize sets to this run's length in a scheduler's state


def launch(nproc: int, plan: Path, number: int) -> subprocess.CompletedProcess[str]:
    command = [WORKER, str(plan), str(number)]
    if nproc > 1:
        command = [
            "-m",
            "torch.distributed.run",
            f"--nproc_per_node={nproc}",
            f"--master_port={free_port()}",
            "--max-restarts=0",
            *command,
        ]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, *command], capture_output=True, text=True, timeout=300, env=env
    )
    assert done.returncode == 0, f"launch {number}\n{done.stderr[-6000:]}"
    return done


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    root = tmp_path_factory.mktemp("resize")
    x, y, z, f = (str(root / name) for name in "xyzf")
    cosine = {"scheduler": "CosineAnnealingLR", "scheduler_kwargs": {}}
    plan = [
        [
            {"out": x, "stop_at": 4},
            {"out": z, "stop_at": 3, "checkpoint_every": "2 steps"},
            {"out": f, "epochs": 1},
        ],
        [
            {"out": x, "stop_at": 10},
            {"out": y, "stop_at": 8, **cosine},
            {"out": z, "checkpoint_every": "2 steps", "tag": "-refused"},
            {"out": z, "checkpoint_every": "2 steps", "resume": 1},
            {"out": f},
        ],
        [{"out": x}, {"out": y, **cosine}],
    ]
    (root / "plan.json").write_text(json.dumps(plan))
    stderr = [
        launch(nproc, root / "plan.json", number).stderr for number, nproc in enumerate((1, 2, 1))
    ]
    return root, stderr


def records(out: Path, launch: int, nproc: int, tag: str = "") -> list[dict[str, Any]]:
    return [torch.load(out / f"launch{launch}{tag}_rank{rank}.pt") for rank in range(nproc)]


def same(a: Any, b: Any) -> bool:
    """Equal bit for bit: tensors by value and dtype, containers item by item."""
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(p, q) for p, q in zip(a, b, strict=True))
    return bool(a == b)


def assert_loaded_exactly(checkpoint: Path, resumed: dict[str, Any], total: int) -> None:
    """Model, optimizer and scheduler as the checkpoint holds them, bit for bit; the schedule's
    length (where its state holds one) is this run's."""
    saved = checkpoint / "accelerate"
    assert same(load_file(saved / "model.safetensors"), resumed["model"])
    assert same(torch.load(saved / "optimizer.bin", weights_only=True), resumed["optimizer"])
    scheduler = torch.load(saved / "scheduler.bin", weights_only=True)
    loaded = resumed["scheduler"]
    for key in LENGTHS & scheduler.keys():
        assert loaded.pop(key) == total
        scheduler.pop(key)
    assert same(scheduler, loaded)


def state_of(checkpoint: Path) -> dict[str, Any]:
    state: dict[str, Any] = json.loads((checkpoint / "state.json").read_text())
    return state


def samples_by_epoch(*ranks: dict[str, Any]) -> dict[int, collections.Counter[int]]:
    read: dict[int, collections.Counter[int]] = collections.defaultdict(collections.Counter)
    for record in ranks:
        for epoch, *indices in record["seen"]:
            read[epoch].update(indices)
    return read


def linear(step: int, total: int) -> float:
    """LinearWithWarmup's lr after ``step`` scheduler steps, as LambdaLR computes it."""
    if step < WARMUP:
        return LR * (step / WARMUP)
    return LR * max(0.0, (total - step) / max(1, total - WARMUP))


def test_one_to_two_to_one_mid_epoch(runs: tuple[Path, list[str]]) -> None:
    root, stderr = runs
    out = root / "x"
    first, (second, second_1), (third,) = (
        records(out, 0, 1)[0],
        records(out, 1, 2),
        records(out, 2, 1),
    )
    checkpoints = out / "run" / "checkpoints"
    # 1 -> 2: 8 batches read on one process are 4 on each of two; the counters go on.
    made = state_of(checkpoints / "checkpoint_000001")
    assert made["global_step"] == 4
    assert made["batches_seen_in_epoch"] == 8
    for record in (second, second_1):
        assert record["resumed"]["state"] == {
            "global_step": 4,
            "epoch": 0,
            "batch_iteration": 8,
            "batches_seen_in_epoch": 4,
            "finished": False,
        }
        # 4 steps done + 10 left on two processes (8 batches of epoch 0, 12 of epoch 1 each).
        assert_loaded_exactly(checkpoints / "checkpoint_000001", record["resumed"], 14)
    assert second["final"]["global_step"] == 10
    assert second["final"]["batch_iteration"] == 20
    # 2 -> 1: 4 batches on each of two are 8 on one; 10 steps done + 8 left.
    assert third["resumed"]["state"] == {
        "global_step": 10,
        "epoch": 1,
        "batch_iteration": 20,
        "batches_seen_in_epoch": 8,
        "finished": False,
    }
    assert_loaded_exactly(checkpoints / "checkpoint_000003", third["resumed"], 18)
    assert third["final"] == {
        "global_step": 18,
        "epoch": 2,
        "batch_iteration": 36,
        "batches_seen_in_epoch": 0,
        "finished": True,
    }
    # Every sample once an epoch, none read twice where the number of processes changed.
    read = samples_by_epoch(first, second, second_1, third)
    assert read == {epoch: collections.Counter(range(96)) for epoch in (0, 1)}
    # Steps are counted on, never again: 1..4, 5..10, 11..18.
    steps = [[step for step, _ in record["lrs"]] for record in (first, second, third)]
    assert steps == [[1, 2, 3, 4], list(range(5, 11)), list(range(11, 19))]
    # The first step after each resume uses the checkpoint's lr; the schedule then spans the
    # steps done and the steps left here, and ends at its end (0) with the last step.
    for record, checkpoint, total in ((second, 1, 14), (third, 3, 18)):
        optimizer = torch.load(
            checkpoints / f"checkpoint_{checkpoint:06d}" / "accelerate" / "optimizer.bin",
            weights_only=True,
        )
        (_first_step, first_lr), *rest = record["lrs"]
        assert first_lr == optimizer["param_groups"][0]["lr"]
        assert rest == [(step, linear(step - 1, total)) for step, _ in rest]
    assert third["final_lr"] == 0.0
    assert third["schedule"] == {"last_epoch": 18, "T_max": None, "num_training_steps": 18}
    # One warning, on the main process, saying what is exact and what is not.
    assert len(second["warnings"]) == 1
    assert second_1["warnings"] == []
    warning = third["warnings"]
    assert warning == [
        "resuming checkpoint_000003, made on 2 processes, on 1 process: the model, optimizer, "
        "scheduler and counters are the checkpoint's, and the samples that come next are those "
        "the run had not yet read; the learning-rate schedule ends at this run's last step. "
        "Not bit-identical to a run that kept 2 processes: the random streams (dropout, "
        "data-loader worker seeds; each process takes the RNG state of the process of its "
        "rank, if the checkpoint has one) and the float order in which gradients are averaged "
        "across processes"
    ]
    assert "from checkpoint_000001 (made on 1 process): epoch 1/2 at batch 4/12" in stderr[1]
    assert "from checkpoint_000003 (made on 2 processes): epoch 2/2 at batch 8/24" in stderr[2]


def test_two_to_one_mid_epoch_with_a_schedule_sized_in_its_state(
    runs: tuple[Path, list[str]],
) -> None:
    root, _ = runs
    out = root / "y"
    first, first_1 = records(out, 1, 2)
    (resumed,) = records(out, 2, 1)
    checkpoint = out / "run" / "checkpoints" / "checkpoint_000002"
    assert state_of(checkpoint)["batches_seen_in_epoch"] == 4
    assert resumed["resumed"]["state"] == {
        "global_step": 8,
        "epoch": 1,
        "batch_iteration": 16,
        "batches_seen_in_epoch": 8,
        "finished": False,
    }
    # CosineAnnealingLR's T_max, 12 on two processes, is 8 done + 8 left on one.
    assert_loaded_exactly(checkpoint, resumed["resumed"], 16)
    assert resumed["final"] == {
        "global_step": 16,
        "epoch": 2,
        "batch_iteration": 32,
        "batches_seen_in_epoch": 0,
        "finished": True,
    }
    optimizer = torch.load(checkpoint / "accelerate" / "optimizer.bin", weights_only=True)
    assert resumed["lrs"][0] == (9, optimizer["param_groups"][0]["lr"])
    assert resumed["final_lr"] == 0.0  # the cosine's end, reached with the last step
    assert resumed["schedule"]["T_max"] == 16
    assert resumed["schedule"]["last_epoch"] == 16
    read = samples_by_epoch(first, first_1, resumed)
    assert read == {epoch: collections.Counter(range(96)) for epoch in (0, 1)}


def test_a_moment_that_two_processes_cannot_split_is_refused_with_what_to_do(
    runs: tuple[Path, list[str]],
) -> None:
    root, _ = runs
    out = root / "z"
    refused, refused_1 = records(out, 1, 2, "-refused")
    folder = out / "run" / "checkpoints" / "checkpoint_000002"
    expected = (
        f"checkpoint {folder} was made on 1 process, and this run has 2; it was made at batch 6 "
        "of epoch 1 (step 3), after 6 batches of the epoch's order; on 2 processes that is 3 "
        "batches each, not a whole number of accumulation windows of "
        "2 batches. To go on: resume it on a number of processes that splits it so: 1, 3; or "
        "pass resume=1 (checkpoint_000001, epoch 0, step 2), a moment this run can start from; "
        "or give this run an output folder of its own (the Trainer's model_path; --output in "
        "the examples), or pass resume=False to start afresh in this one (its checkpoints are "
        "then moved aside to checkpoints.old-<n>, not deleted)."
    )
    assert refused["refused"] == refused_1["refused"] == expected
    assert "seen" not in refused  # it trained nothing
    # As it says: resume=1 starts from step 2, 4 batches read on one process, 2 on each of two.
    for again in records(out, 1, 2):
        assert again["resumed"]["state"]["global_step"] == 2
        assert again["resumed"]["state"]["batches_seen_in_epoch"] == 2
        assert again["final"]["global_step"] == 13  # 2 done + 11 left on two processes


def test_a_finished_run_goes_on_for_another_epoch_on_two_processes(
    runs: tuple[Path, list[str]],
) -> None:
    root, _ = runs
    out = root / "f"
    (finished,) = records(out, 0, 1)
    resumed, resumed_1 = records(out, 1, 2)
    checkpoint = out / "run" / "checkpoints" / "checkpoint_000001"
    assert state_of(checkpoint)["finished"] is True
    for record in (resumed, resumed_1):
        # The run goes on, so it is no longer finished from its resume on (issue 43).
        assert record["resumed"]["state"] == {
            "global_step": 12,
            "epoch": 1,
            "batch_iteration": 24,
            "batches_seen_in_epoch": 0,
            "finished": False,
        }
        assert_loaded_exactly(checkpoint, record["resumed"], 18)
        assert record["final"]["global_step"] == 18  # 12 + 6 steps of one epoch on two
        assert record["final"]["batch_iteration"] == 36
    assert samples_by_epoch(finished)[0] == collections.Counter(range(96))
    assert samples_by_epoch(resumed, resumed_1)[1] == collections.Counter(range(96))
