"""``accmt launch`` beyond one attempt and one machine, with real processes:

- restarts: ``--max-restarts 5`` with rank 1 SIGKILLed at five random steps, one after the other
  (each restart is killed again, later), finishes bit-identical to the same run never killed;
- two machines on one host: two ``accmt launch`` commands (machine ranks 0 and 1, one process
  each) train together, to the same weights as one 2-process launch.

One launch gives both the killed run and its uninterrupted reference (``--reference``).
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from ._launch import WORKERS, free_port

pytestmark = pytest.mark.distributed

ACCMT = str(Path(sys.executable).parent / "accmt")
WORKER = str(WORKERS / "elastic_worker.py")
STEPS = 24  # 2 epochs of 12 optimizer steps on 2 processes


def accmt(*argv: str) -> subprocess.Popen[str]:
    environment = {**os.environ, "PYTHONUNBUFFERED": "1"}
    environment.pop("OMP_NUM_THREADS", None)  # accmt launch sets it per process
    return subprocess.Popen(
        [ACCMT, *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment,
    )


def finished(*launches: subprocess.Popen[str]) -> None:
    for launch in launches:
        out, err = launch.communicate(timeout=400)
        assert launch.returncode == 0, f"{out[-2000:]}\n{err[-6000:]}"


def results(folder: Path, name: str) -> list[dict[str, Any]]:
    return [torch.load(folder / f"{name}_rank{rank}.pt") for rank in (0, 1)]


def same(first: dict[str, Any], second: dict[str, Any]) -> bool:
    weights = first["weights"]
    return weights.keys() == second["weights"].keys() and all(
        torch.equal(value, second["weights"][name]) for name, value in weights.items()
    )


@pytest.fixture(scope="module")
def killed_five_times(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[int]]:
    folder = tmp_path_factory.mktemp("elastic")
    steps = sorted(random.sample(range(1, STEPS), 5))  # a fresh draw each run of the suite
    kills = ["--kill-at", *map(str, steps)]
    # A port from this xdist worker's block: the launcher's own pick is an ephemeral port, which
    # another test's gloo sockets may take between its check and the rendezvous' bind.
    port = ["--main-port", str(free_port())]
    restarts = ["--cpu", "-N", "2", "--max-restarts", "5", *port]
    launch = accmt("launch", *restarts, WORKER, str(folder), "--reference", *kills)
    finished(launch)
    return folder, steps


def test_five_kills_in_a_row_resume_to_the_uninterrupted_run(
    killed_five_times: tuple[Path, list[int]],
) -> None:
    folder, steps = killed_five_times
    reference, final = results(folder, "reference"), results(folder, "final")
    for rank in (0, 1):
        assert same(final[rank], reference[rank]), f"rank {rank}, killed after steps {steps}"
        assert final[rank]["state"]["global_step"] == STEPS
        # Five attempts killed, the sixth finished.
        assert (folder / f"attempts_rank{rank}.txt").read_text() == "6", steps
    assert same(final[0], final[1])


def test_two_machines_on_one_host_train_as_one_two_process_launch(
    tmp_path: Path, killed_five_times: tuple[Path, list[int]]
) -> None:
    port = str(free_port())
    together = ["--num-machines", "2", "--main-address", "127.0.0.1", "--main-port", port]
    machines = [
        accmt(
            "launch",
            "--cpu",
            "-N",
            "1",
            *together,
            "--machine-rank",
            str(rank),
            WORKER,
            str(tmp_path),
        )
        for rank in (0, 1)
    ]
    finished(*machines)
    reference = results(killed_five_times[0], "reference")
    final = results(tmp_path, "final")
    for rank in (0, 1):
        assert same(final[rank], reference[rank]), rank
