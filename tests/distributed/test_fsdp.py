"""FSDP2 on two CPU processes, killed with SIGKILL and resumed, with sharded and with full state
dicts: the uninterrupted run's final weights bit for bit. The sharded runs freeze the first
layer: their checkpoints hold only the shards that train, and a resume with another base is
refused by name.

Accelerate runs DDP on the CPU whatever the plugin says; the worker's harness makes it take its
FSDP path (see workers/fsdp_worker.py): real processes, a real gloo group, torch's
``fully_shard``, Accelerate's FSDP ``save_state`` and ``load_state``. On a machine with two GPUs
the same test runs on them, where nothing needs forcing. The runs share three launches (most
of a launch is importing torch): the uninterrupted runs, the references (with nothing frozen
for the full state dicts, with the first layer frozen for the sharded ones: the state dict type
changes only how checkpoints are written), then the sharded run until its kill; its resume,
then the full run until its kill; the full run's resume, a resume of the sharded run with
another base, then a run that is not forced, which shows what a user gets on the CPU: DDP, and
a warning that says so.

Two launches more resume sharded checkpoints of two processes on another number (the run with
its first layer frozen on 1, the uninterrupted one on 3): torch.distributed.checkpoint reshards
model and optimizer on load, and the whole state gathered after the load is the one gathered
as the checkpoint was written.
"""

from __future__ import annotations

import json
import math
import os
import pickle
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import attrs
import pytest
import torch

from accmt_trainer import CheckpointError
from accmt_trainer.checkpointing._dcp import read_metadata
from accmt_trainer.checkpointing._manifest import inventory, verify
from accmt_trainer.checkpointing._run_facts import MANIFEST

from ._launch import WORKERS, free_port

pytestmark = pytest.mark.distributed

WORKER = str(WORKERS / "fsdp_worker.py")
STEPS = 8  # 64 samples, batch 8, two processes: 4 optimizer steps an epoch, 2 epochs
SHARDED, FULL = "SHARDED_STATE_DICT", "FULL_STATE_DICT"


@dataclass
class Ran:
    root: Path
    ended: list[subprocess.CompletedProcess[str]]

    def events(self, name: str, rank: int = 0) -> list[dict[str, Any]]:
        lines = (self.root / name / f"events_rank{rank}.jsonl").read_text().splitlines()
        return [json.loads(line) for line in lines]

    def weights(self, name: str) -> list[dict[str, Any]]:
        return [torch.load(self.root / name / f"final_rank{rank}.pt") for rank in range(2)]

    def checkpoint(self, name: str) -> Path:
        """The run's newest checkpoint."""
        return sorted((self.root / name / "run" / "checkpoints").glob("checkpoint_*"))[-1]


def run(
    root: Path,
    name: str,
    state_dict: str,
    kill: int | None = None,
    forced: bool = True,
    frozen: bool = False,
    shift: float = 0.0,
    **more: Any,
) -> dict[str, Any]:
    """One run of a launch (see the worker's text)."""
    return {
        "out": str(root / name),
        "state_dict": state_dict,
        "kill_at_step": kill,
        "forced": forced,
        "frozen": frozen,
        "shift": shift,
        **more,
    }


def launch_plan(plan: Path, index: int, processes: int) -> subprocess.CompletedProcess[str]:
    """Launch ``index`` of ``plan`` on ``processes`` CPU processes (or GPUs: see the worker)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "ACCELERATE_USE_FSDP": "true", "FSDP_VERSION": "2"}
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        f"--nproc_per_node={processes}",
        f"--master_port={free_port()}",
        "--max-restarts=0",
        WORKER,
        str(plan),
        str(index),
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> Ran:
    root = tmp_path_factory.mktemp("fsdp")
    # The sharded run dies after step 7 (its newest checkpoint: step 6, within epoch 2); the
    # full one after step 5 (its newest: step 4, an epoch's end).
    # The sharded runs freeze the first layer (their reference too); the full ones do not.
    plan = [
        [
            run(root, "uninterrupted", SHARDED, full_states=True),  # resumed on 3 too
            run(root, "frozen", SHARDED, frozen=True),
            run(root, "sharded", SHARDED, kill=7, frozen=True, full_states=True),  # and on 1
        ],
        [run(root, "sharded", SHARDED, frozen=True), run(root, "full", FULL, kill=5)],
        [
            run(root, "full", FULL),
            run(root, "sharded", SHARDED, frozen=True, shift=0.5),  # another base: refused
            run(root, "unforced", SHARDED, forced=False),
        ],
    ]
    (root / "plan.json").write_text(json.dumps(plan))
    ended = [launch_plan(root / "plan.json", index, 2) for index in range(len(plan))]
    return Ran(root, ended)


# Checkpoints of two processes resumed on another number (1, 3): the run that made it, which
# one, its step, and the step the resumed run ends at. The sharded run's checkpoint 3 (step 6,
# its first layer frozen) lies within the second epoch (2 of each process's 4 batches, so 4 of
# the order's 8: 4 on one process); the uninterrupted run's checkpoint 2 (step 4) at the first
# epoch's end, where any number of processes starts (3 batches each on 3).
RESIZES = {
    1: ("sharded", "checkpoint_000003", 6, 10),
    3: ("uninterrupted", "checkpoint_000002", 4, 7),
}


@pytest.fixture(scope="module")
def resized(ran: Ran, tmp_path_factory: pytest.TempPathFactory) -> Ran:
    """One launch a number of processes: a copy of the checkpoint resumed to the run's end."""
    root = tmp_path_factory.mktemp("fsdp-resized")
    plan = []
    for processes, (name, checkpoint, _, _) in RESIZES.items():
        made = ran.root / name / "run" / "checkpoints" / checkpoint
        shutil.copytree(made, root / f"on{processes}" / "run" / "checkpoints" / checkpoint)
        more = {"full_states": True, "resume": True, "cpu": True}
        plan.append([run(root, f"on{processes}", SHARDED, frozen=name == "sharded", **more)])
    (root / "plan.json").write_text(json.dumps(plan))
    ended = [launch_plan(root / "plan.json", i, n) for i, n in enumerate(RESIZES)]
    return Ran(root, ended)


def assert_same(saved: Any, loaded: Any, where: str) -> None:
    """``loaded`` is ``saved``, tensors bit for bit (and of the same dtype)."""
    if isinstance(saved, torch.Tensor):
        assert isinstance(loaded, torch.Tensor), where
        assert saved.dtype == loaded.dtype, where
        assert torch.equal(saved, loaded), where
    elif isinstance(saved, dict):
        assert isinstance(loaded, dict), where
        assert saved.keys() == loaded.keys(), where
        for key in saved:
            assert_same(saved[key], loaded[key], f"{where}.{key}")
    elif isinstance(saved, list):
        assert isinstance(loaded, list), where
        assert len(saved) == len(loaded), where
        for index, (was, is_) in enumerate(zip(saved, loaded, strict=True)):
            assert_same(was, is_, f"{where}[{index}]")
    else:
        assert saved == loaded, where


@pytest.mark.parametrize("processes", sorted(RESIZES))
def test_a_sharded_checkpoint_of_two_processes_resumes_on_another_number(
    ran: Ran, resized: Ran, processes: int
) -> None:
    """Model and optimizer resharded by DCP: the whole state after the load is the one written
    on 2 processes, bit for bit (Adam's step counters and moments of every parameter that
    trains among it; the frozen layer, which the checkpoint leaves out, the model's own), every
    parameter a shard of this run's; the run goes on to its end."""
    made, checkpoint, step, end = RESIZES[processes]
    ended = resized.ended[list(RESIZES).index(processes)]
    assert ended.returncode == 0, ended.stderr[-4000:]
    name = f"on{processes}"
    for rank in range(processes):
        events = resized.events(name, rank)
        assert [e["event"] for e in events] == ["start", "fit_start", "resume", "end"], rank
        assert events[2]["sharded"], events[2]
        assert events[2]["step"] == step, events[2]
        assert events[3]["global_step"] == end
        losses = events[3]["losses"]
        assert len(losses) == end - step, losses
        assert all(map(math.isfinite, losses)), losses
    said = [w for w in resized.events(name)[3]["warnings"] if w.startswith("resuming")]
    assert len(said) == 1, said
    assert said[0].startswith(f"resuming {checkpoint}, made on 2 processes, on {processes} proc")
    saved = torch.load(ran.root / made / f"saved_step{step}.pt")
    loaded = torch.load(resized.root / name / f"loaded_step{step}.pt")
    assert_same(saved, loaded, "state")
    adam = loaded["optimizer"]["state"]
    frozen = {"0.weight", "0.bias"} if made == "sharded" else set()
    assert adam.keys() == loaded["model"].keys() - frozen
    for key, moments in adam.items():
        assert float(moments["step"]) == step, key
        assert moments["exp_avg"].shape == loaded["model"][key].shape, key
        assert moments["exp_avg"].abs().sum() > 0, key


@pytest.mark.parametrize(
    ("name", "kill", "files"),
    [
        (
            SHARDED,
            7,
            [
                "pytorch_model_fsdp_0/.metadata",
                "pytorch_model_fsdp_0/__0_0.distcp",
                "pytorch_model_fsdp_0/__1_0.distcp",
                "optimizer_0/.metadata",
            ],
        ),
        (FULL, 5, ["pytorch_model_fsdp.bin", "optimizer.bin"]),
    ],
    ids=["sharded", "full"],
)
def test_a_killed_fsdp_run_resumes_to_the_uninterrupted_weights_bit_for_bit(
    ran: Ran, name: str, kill: int, files: list[str]
) -> None:
    folder = "sharded" if name == SHARDED else "full"
    killed_in = 0 if name == SHARDED else 1
    for launch in range(3):
        assert ran.ended[launch].returncode == (0 if launch == 2 else 1), ran.ended[launch].stderr
    events = [e for e in ran.events(folder) if e["launch"] <= killed_in + 1]
    assert [(e["launch"], e["event"]) for e in events] == [
        (killed_in, "start"),
        (killed_in, "fit_start"),
        (killed_in, "kill"),
        (killed_in + 1, "start"),
        (killed_in + 1, "fit_start"),
        (killed_in + 1, "resume"),
        (killed_in + 1, "end"),
    ]
    assert events[2]["at"] == f"step {kill}"
    assert events[4]["step"] == events[5]["step"] == kill - 1  # the newest checkpoint's
    assert events[6]["global_step"] == STEPS
    # Accelerate wrote FSDP's layout of the state dict type: both processes' shards.
    accelerate = ran.checkpoint(folder) / "accelerate"
    for file in files:
        assert (accelerate / file).is_file(), sorted(accelerate.rglob("*"))
    reference = "frozen" if name == SHARDED else "uninterrupted"
    for rank, (wanted, found) in enumerate(
        zip(ran.weights(reference), ran.weights(folder), strict=True)
    ):
        assert found["state"]["global_step"] == STEPS
        assert wanted["weights"].keys() == found["weights"].keys()
        for key, weight in wanted["weights"].items():
            assert torch.equal(weight, found["weights"][key]), f"rank {rank}: {key} differs"


def test_a_sharded_checkpoint_holds_only_the_shards_that_train(ran: Ran) -> None:
    """The frozen layer is in no checkpoint of the sharded run: DCP's model folder holds the
    trained layer's entries alone, frozen.json lists the frozen ones; the run with nothing
    frozen writes every parameter and no frozen.json."""
    checkpoints = sorted((ran.root / "sharded" / "run" / "checkpoints").glob("checkpoint_*"))
    assert checkpoints
    for checkpoint in checkpoints:
        model = checkpoint / "accelerate" / "pytorch_model_fsdp_0" / ".metadata"
        assert set(read_metadata(model).state_dict_metadata) == {"model.3.weight", "model.3.bias"}
        frozen = json.loads((checkpoint / "frozen.json").read_text())["parameters"]
        assert set(frozen) == {"0.weight", "0.bias"}
        assert frozen["0.weight"]["shape"] == [32, 2]  # the full tensor's, not a shard's
    whole = ran.checkpoint("uninterrupted")
    assert not (whole / "frozen.json").exists()
    held = read_metadata(whole / "accelerate" / "pytorch_model_fsdp_0" / ".metadata")
    assert {"model.0.weight", "model.0.bias"} <= set(held.state_dict_metadata)


def test_a_sharded_resume_with_another_base_is_refused_by_every_process(ran: Ran) -> None:
    for rank in range(2):
        refused = [e["error"] for e in ran.events("sharded", rank) if e["event"] == "refused"]
        assert len(refused) == 1, rank
        assert "the parameter '0.bias': its values differ" in refused[0]


def test_evaluation_leaves_the_parameters_sharded(ran: Ran) -> None:
    """After the sanity check's forwards (at every fit's start), and once a checkpoint is
    loaded, every parameter is still a shard; the final weights, gathered from the shards,
    are the same on each process."""
    for name in ("uninterrupted", "frozen", "sharded", "full"):
        for rank in range(2):
            starts = [e for e in ran.events(name, rank) if e["event"] in ("fit_start", "resume")]
            assert starts, (name, rank)
            assert all(e["sharded"] for e in starts), (name, rank, starts)
    first, second = ran.weights("uninterrupted")
    for key, weight in first["weights"].items():
        assert torch.equal(weight, second["weights"][key])


@pytest.mark.skipif(torch.cuda.device_count() >= 2, reason="on GPUs Accelerate shards")
def test_fsdp_on_the_cpu_without_the_harness_warns_that_accelerate_ran_ddp(ran: Ran) -> None:
    warned = []
    for rank in range(2):
        events = ran.events("unforced", rank)
        assert [e["event"] for e in events] == ["start", "fit_start", "end"]  # nothing to resume
        assert events[1]["sharded"] is False
        warned.append([w for w in events[2]["warnings"] if "FSDP" in w])
    main, other = warned
    assert other == []  # the main process says it
    assert len(main) == 1, main
    assert main[0].startswith(
        "FSDP was asked for (ACCELERATE_USE_FSDP), but Accelerate ran DDP on the CPU (MULTI_CPU)"
    )
    accelerate = ran.checkpoint("unforced") / "accelerate"
    assert (accelerate / "model.safetensors").is_file()


class Payload:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (f"touch {self.marker}",))


@pytest.mark.parametrize("target", ["pytorch_model_fsdp_0/.metadata", "optimizer_0/.metadata"])
def test_a_crafted_metadata_pickle_is_refused_without_running_code(
    ran: Ran, tmp_path: Path, target: str
) -> None:
    checkpoint = shutil.copytree(ran.checkpoint("sharded"), tmp_path / "checkpoint")
    verify(checkpoint)  # the real one passes
    marker = tmp_path / "code-ran"
    (checkpoint / "accelerate" / target).write_bytes(pickle.dumps(Payload(marker)))
    manifest = json.loads((checkpoint / MANIFEST).read_text())
    files = inventory(checkpoint)  # forged to match
    manifest["files"] = {name: attrs.asdict(entry) for name, entry in files.items()}
    (checkpoint / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(CheckpointError, match=f"accelerate/{target} is not a valid .metadata"):
        verify(checkpoint)
    assert not marker.exists()
