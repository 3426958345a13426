"""A LoRA model (PEFT adapters on a frozen GPT-2 base), killed with SIGKILL after a checkpoint
and resumed, on one process and through torchrun on two, with synchronous and background
checkpoints: its checkpoints hold no frozen parameter and at most 4x the trainable bytes plus
1 MiB (the adapters, two AdamW moments, the rest), and the resumed run ends with the
uninterrupted run's weights (and weight average) bit for bit on every process. A resume with
another base is refused by every process, naming the parameter. (One process in depth:
tests/trainer/test_frozen_checkpoints.py.)

The runs of one number of processes share three launches (most of a launch is importing torch,
transformers and peft): the uninterrupted run, then the synchronous run until its kill; the
background run until its kill; both resumed, then a resume of the first with another base.
"""

from __future__ import annotations

import json
import signal
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file

from ._launch import launch

pytestmark = [pytest.mark.distributed, pytest.mark.peft]

KILL = 7  # checkpoints every 3 steps: the newest before the kill is step 6's
STEPS = {1: 24, 2: 12}  # 96 token rows in batches of 8, 2 epochs
SHIFTED = "base_model.model.transformer.ln_f.bias"  # what the other base moves


@dataclass
class Ran:
    nproc: int
    root: Path
    ended: list[subprocess.CompletedProcess[str]]

    def events(self, name: str) -> list[dict[str, Any]]:
        return [
            json.loads(line)
            for rank in range(self.nproc)
            for line in (self.root / name / f"events_rank{rank}.jsonl").read_text().splitlines()
        ]

    def model(self, name: str) -> dict[str, Any]:
        """The model's trainable and frozen parameter names and trainable bytes, as the first
        process saw them."""
        return next(e for e in self.events(name) if e["event"] == "model")

    def weights(self, name: str) -> list[dict[str, Any]]:
        return [torch.load(self.root / name / f"final_rank{rank}.pt") for rank in range(self.nproc)]

    def story(self, number: int) -> str:
        return self.ended[number].stderr[-3000:]


def run(root: Path, name: str, **changes: Any) -> dict[str, Any]:
    return {"out": str(root / name), "async": False, "kill_at_step": None, "shift": 0.0, **changes}


def launches(root: Path, nproc: int) -> Ran:
    plan = [
        [run(root, "uninterrupted"), run(root, "sync", kill_at_step=KILL)],
        [run(root, "async", **{"async": True, "kill_at_step": KILL})],
        [
            run(root, "sync"),
            run(root, "async", **{"async": True}),
            run(root, "sync", shift=0.5),
        ],
    ]
    (root / "plan.json").write_text(json.dumps(plan))
    ended = [
        launch("frozen_worker.py", nproc, str(root / "plan.json"), str(number))
        for number in range(len(plan))
    ]
    return Ran(nproc, root, ended)


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> Callable[[int], Ran]:
    done: dict[int, Ran] = {}

    def on(nproc: int) -> Ran:
        if nproc not in done:
            done[nproc] = launches(tmp_path_factory.mktemp(f"frozen_{nproc}"), nproc)
        return done[nproc]

    return on


@pytest.mark.parametrize("background", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("nproc", [1, 2])
def test_a_lora_run_killed_and_resumed_matches_bit_for_bit(
    nproc: int, background: bool, ran: Callable[[int], Ran]
) -> None:
    campaign = ran(nproc)
    name = "async" if background else "sync"
    killed_by = 1 if background else 0
    died = campaign.ended[killed_by]
    # One process dies by its own SIGKILL; on two, torchrun then stops the other.
    assert died.returncode == (-signal.SIGKILL if nproc == 1 else 1), campaign.story(killed_by)
    assert campaign.ended[2].returncode == 0, campaign.story(2)
    events = campaign.events(name)
    assert [e["at"] for e in events if e["event"] == "kill"] == [f"step {KILL}"]
    # A background write may still be in flight at the kill: then the one before it resumes.
    resumed = {e["step"] for e in events if e["event"] == "resume"}
    assert resumed == {6} or (background and resumed == {3}), resumed
    model = campaign.model(name)
    assert model["trainable"]
    assert all("lora_" in key for key in model["trainable"])
    bound = 4 * model["trainable_bytes"] + (1 << 20)
    assert model["frozen_bytes"] > bound  # a checkpoint of the whole model would not fit it
    checkpoints = sorted((campaign.root / name / "run" / "checkpoints").glob("checkpoint_*"))
    assert checkpoints
    for checkpoint in checkpoints:
        held = set(load_file(checkpoint / "accelerate" / "model.safetensors"))
        assert len(held) == len(model["trainable"]), checkpoint
        assert all("lora_" in key for key in held), checkpoint
        frozen = json.loads((checkpoint / "frozen.json").read_text())["parameters"]
        assert sorted(frozen) == model["frozen"], checkpoint
        size = sum(path.stat().st_size for path in checkpoint.rglob("*") if path.is_file())
        assert size <= bound, (checkpoint, size)
    expected, found = campaign.weights("uninterrupted"), campaign.weights(name)
    for rank in range(nproc):
        assert found[rank]["state"]["global_step"] == STEPS[nproc]
        wanted = expected[rank]["weights"]
        assert found[rank]["weights"].keys() == wanted.keys()
        assert any(key.startswith("average/") for key in wanted)
        for key, value in wanted.items():
            assert torch.equal(value, found[rank]["weights"][key]), f"rank {rank}: {key}"


@pytest.mark.parametrize("nproc", [1, 2])
def test_another_base_is_refused_by_every_process(nproc: int, ran: Callable[[int], Ran]) -> None:
    campaign = ran(nproc)
    assert campaign.ended[2].returncode == 0, campaign.story(2)
    refused = [e["error"] for e in campaign.events("sync") if e["event"] == "refused"]
    assert len(refused) == nproc
    for error in refused:
        assert f"the parameter {SHIFTED!r}: its values differ" in error
