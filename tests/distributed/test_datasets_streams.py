"""A `datasets` stream (``to_iterable_dataset(num_shards=8).map(...)``) on 2 processes through
torchrun, SIGKILLed after a checkpoint and resumed in a new launch, goes on from each process's
own place: the resumed launch reads at most one round of batches beyond what it trains (one
batch per process; the main process's, dealt, with ``dispatch_streams=True``), plus what the
loader's workers prefetch with ``dataloader_num_workers=2``, and ends bit-identical to the
uninterrupted run. Where the stream was read is what its ``map`` made, noted per process.

The three variants share four launches: the first trains the three uninterrupted runs and
the first killed one; each later launch resumes the run killed before it, then starts the next
killed one (see workers/datasets_stream_worker.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import torch

from ._launch import launch

pytestmark = [pytest.mark.distributed, pytest.mark.datasets]

VARIANTS = ("plain", "workers", "dispatch")
BATCH, TRAINED_AFTER_RESUME = 4, 16 - 10  # max_steps 16, resumed from the checkpoint of step 10
WORKERS, PREFETCH = 2, 2  # dataloader_num_workers, torch's default prefetch_factor
LAUNCHES = [
    ["whole:plain", "whole:workers", "whole:dispatch", "kill:plain"],
    ["resume:plain", "kill:workers"],
    ["resume:workers", "kill:dispatch"],
    ["resume:dispatch"],
]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """The four launches; the output of the launch that resumed each variant."""
    out = tmp_path_factory.mktemp("datasets_streams")
    said: dict[str, str] = {}
    for number, phases in enumerate(LAUNCHES, start=1):
        done = launch("datasets_stream_worker.py", 2, str(out), str(number), *phases)
        for phase in phases:
            kind, variant = phase.split(":")
            if kind == "resume":
                said[variant] = done.stderr
        killed = any(phase.startswith("kill:") for phase in phases)
        _check_end(done, killed, phases)
    return out, said


def _check_end(done: subprocess.CompletedProcess[str], killed: bool, phases: list[str]) -> None:
    if killed:
        assert done.returncode != 0, (phases, done.stderr[-3000:])
        assert "(SIGKILL)" in done.stderr, (phases, done.stderr[-3000:])
    else:
        assert done.returncode == 0, (phases, done.stderr[-3000:])


def read_in_launch(folder: Path, rank: int, launch_number: int) -> int:
    """How many samples the stream's ``map`` made on process ``rank`` in that launch."""
    path = folder / f"read_rank{rank}.txt"  # none where the process never read the stream
    lines = path.read_text().split("\n") if path.exists() else []
    return sum(1 for line in lines if line.split(" ")[0] == str(launch_number))


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_killed_datasets_stream_resumes_from_each_process_s_place(
    runs: tuple[Path, dict[str, str]], variant: str
) -> None:
    out, said = runs
    resumed_in = 1 + [f"resume:{variant}" in phases for phases in LAUNCHES].index(True)
    folder = out / variant / "resumed"
    assert "resumed/run from checkpoint_000002: epoch 1/2 at batch 10/?" in said[variant]
    assert "read again and skipped" not in said[variant]
    # One round beyond what is trained: one batch per process, each reading its own shards;
    # dispatched, the main process reads every process's batch of each round.
    per_round = BATCH * (2 if variant == "dispatch" else 1)
    bound = (TRAINED_AFTER_RESUME + 1) * per_round
    if variant == "workers":
        bound += WORKERS * PREFETCH * BATCH
    read = [read_in_launch(folder, rank, resumed_in) for rank in (0, 1)]
    assert max(read) <= bound, (variant, read, bound)
    assert sum(read) >= 2 * TRAINED_AFTER_RESUME * BATCH, (variant, read)  # it did read
    for rank in (0, 1):
        whole = torch.load(out / variant / "whole" / f"final_rank{rank}.pt")
        got = torch.load(folder / f"final_rank{rank}.pt")
        assert got["global_step"] == whole["global_step"] == 16
        for name, weight in whole["weights"].items():
            assert torch.equal(weight, got["weights"][name]), (variant, rank, name)
