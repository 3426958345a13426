"""Kill a run with SIGKILL at random steps and inside checkpoint writes, resume it, and get
the uninterrupted run's final weights bit for bit: on one process and through torchrun."""

from __future__ import annotations

import random
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from ._launch import WORKERS, free_port

pytestmark = pytest.mark.distributed

WORKER = str(WORKERS / "resume_worker.py")
# 200 samples, batch 8: 25 batches per process per epoch on one process, 13 on two; with
# accumulation 2, 13 (resp. 7) optimizer steps per epoch, 3 epochs.
STEPS = {1: 39, 2: 21}


def launch(out: Path, nproc: int, *kill: str) -> subprocess.CompletedProcess[str]:
    if nproc == 1:
        command = [sys.executable, WORKER, str(out), *kill]
    else:
        command = [
            sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={nproc}",
            f"--master_port={free_port()}", "--max-restarts=0", WORKER, str(out), *kill,
        ]  # fmt: skip
    env = {**__import__("os").environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)


def final_weights(out: Path, nproc: int) -> list[dict[str, object]]:
    return [torch.load(out / f"final_rank{rank}.pt") for rank in range(nproc)]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> Callable[[int], Path]:
    """The run without a kill on ``nproc`` processes, launched once for every test that
    compares with it (the kills and the checkpoint mode change only the resumed runs)."""
    runs: dict[int, Path] = {}

    def run(nproc: int) -> Path:
        if nproc not in runs:
            out = tmp_path_factory.mktemp(f"uninterrupted_{nproc}")
            done = launch(out, nproc)
            assert done.returncode == 0, done.stderr[-3000:]
            runs[nproc] = out
        return runs[nproc]

    return run


@pytest.mark.parametrize("background", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("nproc", [1, 2])
def test_killed_and_resumed_run_matches_uninterrupted_bit_for_bit(
    tmp_path: Path, nproc: int, background: bool, uninterrupted: Callable[[int], Path]
) -> None:
    seed = random.randrange(10**6)
    rng = random.Random(seed)
    total = STEPS[nproc]
    # Two kills after random steps, then one inside the second checkpoint the next launch
    # writes: each kill comes after the step the run resumes from (checkpoints every 3 steps),
    # and that last launch still has two checkpoints to write before the run ends.
    kills = sorted(rng.sample(range(2, total - 8), 2))
    story = f"seed {seed}: SIGKILL after steps {kills} and inside the 2nd checkpoint of a launch"
    mode = ["--async"] if background else []

    reference = uninterrupted(nproc)
    resumed = tmp_path / "resumed"
    for kill in (["--kill-at-step", str(kills[0])], ["--kill-at-step", str(kills[1])],
                 ["--kill-in-checkpoint", "2"]):  # fmt: skip
        died = launch(resumed, nproc, *kill, *mode)
        assert died.returncode != 0, f"{story}: {kill} did not kill the run"
        assert not list(resumed.glob("final_rank*.pt"))
    done = launch(resumed, nproc, *mode)
    assert done.returncode == 0, f"{story}\n{done.stderr[-3000:]}"

    expected, got = final_weights(reference, nproc), final_weights(resumed, nproc)
    for rank in range(nproc):
        assert got[rank]["state"]["global_step"] == total
        for name, weight in expected[rank]["weights"].items():
            assert torch.equal(weight, got[rank]["weights"][name]), f"{story}: {name} differs"


@pytest.mark.parametrize("nproc", [1, 2])
def test_a_killed_curriculum_resumes_to_the_uninterrupted_weights(
    tmp_path: Path, nproc: int
) -> None:
    # Stages end at steps 9 and 17 of 24; checkpoints every 3 steps. The first kill resumes
    # from step 6 and crosses stage 0's end; the second resumes from step 9, the stage's end
    # itself; the third dies inside the checkpoint of step 15 and resumes in stage 1's cut pass
    # from step 12.
    reference = tmp_path / "uninterrupted"
    done = launch(reference, nproc, "--curriculum")
    assert done.returncode == 0, done.stderr[-3000:]
    resumed = tmp_path / "resumed"
    for kill in (["--kill-at-step", "8"], ["--kill-at-step", "11"], ["--kill-in-checkpoint", "2"]):
        died = launch(resumed, nproc, "--curriculum", *kill)
        assert died.returncode != 0, f"{kill} did not kill the run"
    done = launch(resumed, nproc, "--curriculum")
    assert done.returncode == 0, done.stderr[-3000:]
    expected, got = final_weights(reference, nproc), final_weights(resumed, nproc)
    for rank in range(nproc):
        assert got[rank]["state"]["global_step"] == 24
        assert got[rank]["state"]["epoch"] == expected[rank]["state"]["epoch"]
        for name, weight in expected[rank]["weights"].items():
            assert torch.equal(weight, got[rank]["weights"][name]), f"{name} differs"


def test_a_finished_run_resumes_to_nothing(
    tmp_path: Path, uninterrupted: Callable[[int], Path]
) -> None:
    finished = shutil.copytree(uninterrupted(1), tmp_path / "finished")
    before = torch.load(finished / "final_rank0.pt")
    again = launch(finished, 1)
    assert again.returncode == 0
    assert "already finished" in again.stderr
    after = torch.load(finished / "final_rank0.pt")
    for name, weight in before["weights"].items():
        assert torch.equal(weight, after["weights"][name])
