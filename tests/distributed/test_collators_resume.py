"""A masked-LM run killed with SIGKILL mid-epoch and resumed masks exactly the tokens the
uninterrupted run masked, and ends with its weights bit for bit: on one process with two
DataLoader workers, and on two processes through torchrun. Every process masks each sample as
the one-process run without workers did."""

from __future__ import annotations

import json
import random
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
import torch

from ._launch import launch as launch_worker

pytestmark = pytest.mark.distributed

# 96 samples, batch 8, 2 epochs: 24 optimizer steps on one process, 12 on two; checkpoints
# every 5 steps, all of them mid-epoch.
STEPS = {1: 24, 2: 12}
Masks = dict[tuple[int, int], list[tuple[list[int], list[int]]]]


def launch(out: Path, nproc: int, *args: str) -> subprocess.CompletedProcess[str]:
    return launch_worker("collators_resume_worker.py", nproc, str(out), *args)


def run_to_end(out: Path, nproc: int, *args: str) -> None:
    done = launch(out, nproc, *args)
    assert done.returncode == 0, done.stderr[-3000:]


def masks(out: Path) -> Masks:
    """Every masked sample any launch logged, by (epoch, sample index)."""
    found: Masks = {}
    for log in sorted(out.glob("masks_rank*.jsonl")):
        for line in log.read_text().splitlines():
            entry = json.loads(line)
            key = (entry["epoch"], entry["index"])
            found.setdefault(key, []).append((entry["input_ids"], entry["labels"]))
    return found


def weights(out: Path, rank: int) -> dict[str, Any]:
    loaded: dict[str, Any] = torch.load(out / f"final_rank{rank}.pt")["weights"]
    return loaded


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The uninterrupted run on one process, collating in the main process."""
    out = tmp_path_factory.mktemp("reference")
    run_to_end(out, 1, "--workers", "0")
    return out


def kill_step(nproc: int) -> int:
    """A random step past the first checkpoint and not one itself: the resumed run redoes
    the steps after the checkpoint before it, in the middle of an epoch."""
    return random.choice([step for step in range(6, STEPS[nproc] - 1) if step % 5])


def kill_and_resume(out: Path, nproc: int, kill: int) -> None:
    died = launch(out, nproc, "--workers", "2", "--kill-at-step", str(kill))
    # A run that crashed is not a run that was killed: torchrun reports its worker's signal.
    killed = died.returncode == -signal.SIGKILL or "SIGKILL" in died.stderr
    assert killed, f"the run was not killed at step {kill}: {died.stderr[-3000:]}"
    assert not list(out.glob("final_rank*.pt"))
    run_to_end(out, nproc, "--workers", "2")


def assert_same_masks(got: Masks, expected: Masks, story: str) -> None:
    assert set(got) == set(expected), f"{story}: not every sample of every epoch was trained on"
    for key, logged in got.items():
        (wanted,) = expected[key]
        # A sample is logged again when a resumed run redoes the steps after its checkpoint.
        for entry in logged:
            assert entry == wanted, f"{story}: epoch {key[0]}, sample {key[1]} masked otherwise"
    some_masked = sum(
        label != -100 for entries in expected.values() for _, labels in entries for label in labels
    )
    assert some_masked > 100


def test_one_process_with_workers_resumed_matches_uninterrupted(
    tmp_path: Path, reference: Path
) -> None:
    kill = kill_step(1)
    story = f"1 process, 2 workers, SIGKILL after step {kill}"
    kill_and_resume(tmp_path, 1, kill)
    logged = masks(tmp_path)
    assert sum(map(len, logged.values())) > len(logged), f"{story}: no step was redone"
    assert_same_masks(logged, masks(reference), story)
    expected, got = weights(reference, 0), weights(tmp_path, 0)
    for name, weight in expected.items():
        assert torch.equal(weight, got[name]), f"{story}: {name} differs"


def test_two_processes_resumed_match_uninterrupted_and_mask_as_one_process(
    tmp_path: Path, reference: Path
) -> None:
    kill = kill_step(2)
    story = f"2 processes, 2 workers each, SIGKILL after step {kill}"
    uninterrupted = tmp_path / "uninterrupted"
    run_to_end(uninterrupted, 2, "--workers", "0")
    resumed = tmp_path / "resumed"
    kill_and_resume(resumed, 2, kill)
    one_process = masks(reference)
    assert_same_masks(masks(uninterrupted), one_process, "2 processes uninterrupted")
    assert_same_masks(masks(resumed), one_process, story)
    for rank in range(2):
        expected, got = weights(uninterrupted, rank), weights(resumed, rank)
        for name, weight in expected.items():
            assert torch.equal(weight, got[name]), f"{story}: rank {rank}: {name} differs"
