"""A stream without a length (a tiny causal LM's token sequences, padded per batch) trains with
the default options and ``max_steps``, and a run SIGKILLed in the middle of an epoch resumes
to the uninterrupted run's weights bit for bit: on one process, and on two through torchrun
with the stream split both ways (each process keeping its share, or dispatched from the main
process). A stream that keeps its place (``state_dict``/``load_state_dict``) is resumed from its
state on one process, not read again. ``evaluate`` and ``predict`` of a stream on 2 and 3
processes equal one process's."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
import torch

from ._launch import launch as launch_worker

pytestmark = pytest.mark.distributed


def launch(out: Path, nproc: int, *args: str) -> subprocess.CompletedProcess[str]:
    return launch_worker("stream_worker.py", nproc, str(out), *args)


def run_to_end(out: Path, nproc: int, *args: str) -> str:
    done = launch(out, nproc, *args)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stderr


def final(out: Path, rank: int) -> dict[str, Any]:
    loaded: dict[str, Any] = torch.load(out / f"final_rank{rank}.pt")
    return loaded


@pytest.mark.parametrize(
    ("nproc", "split", "kill", "steps"),
    [(1, "shard", 15, 26), (2, "shard", 9, 14), (2, "dispatch", 10, 14)],
)
def test_a_stream_killed_mid_epoch_resumes_bit_identical(
    tmp_path: Path, nproc: int, split: str, kill: int, steps: int
) -> None:
    story = f"{nproc} process(es), split {split}, SIGKILL after step {kill}"
    whole, resumed = tmp_path / "whole", tmp_path / "resumed"
    run_to_end(whole, nproc, "fit", "--split", split)
    died = launch(resumed, nproc, "fit", "--split", split, "--kill-at-step", str(kill))
    killed = died.returncode == -signal.SIGKILL or "SIGKILL" in died.stderr
    assert killed, f"{story}: the run was not killed: {died.stderr[-3000:]}"
    said = run_to_end(resumed, nproc, "fit", "--split", split)
    assert said.count("read again and skipped") == 1, said[-3000:]
    for rank in range(nproc):
        expected, got = final(whole, rank), final(resumed, rank)
        # max_steps ends the run in its third pass of the stream: epochs end where it ends.
        assert (got["global_step"], got["epoch"]) == (expected["global_step"], 2) == (steps, 2)
        for name, weight in expected["weights"].items():
            assert torch.equal(weight, got["weights"][name]), f"{story}: rank {rank}: {name}"


def drawn(out: Path) -> list[int]:
    return [int(line) for line in (out / "drawn_rank0.jsonl").read_text().split()]


def test_a_stream_that_keeps_its_place_is_resumed_from_its_state_not_read_again(
    tmp_path: Path,
) -> None:
    whole, resumed = tmp_path / "whole", tmp_path / "resumed"
    run_to_end(whole, 1, "fit", "--placed")
    died = launch(resumed, 1, "fit", "--placed", "--kill-at-step", "15")
    assert died.returncode == -signal.SIGKILL, died.stderr[-3000:]
    (resumed / "drawn_rank0.jsonl").unlink()
    said = run_to_end(resumed, 1, "fit", "--placed")
    assert "read again and skipped" not in said
    # The checkpoint of step 12 is 1 batch (4 samples) into the second pass: the resumed run's
    # stream starts at sample 4 of it, where one read again would start at 0.
    assert drawn(resumed)[:3] == [4, 5, 6]
    assert len(drawn(resumed)) == len(drawn(whole)) - 44 - 4
    expected, got = final(whole, 0), final(resumed, 0)
    assert got["global_step"] == expected["global_step"] == 26
    for name, weight in expected["weights"].items():
        assert torch.equal(weight, got["weights"][name]), name


def test_evaluate_and_predict_of_a_stream_on_2_and_3_processes_equal_one_process(
    tmp_path: Path,
) -> None:
    run_to_end(tmp_path / "one", 1, "infer")
    one = torch.load(tmp_path / "one" / "infer_rank0.pt")
    assert one["predictions"].shape[0] == 17  # every sample once, 17 in 6 batches of 3
    for nproc in (2, 3):
        run_to_end(tmp_path / f"n{nproc}", nproc, "infer")
        for rank in range(nproc):
            got = torch.load(tmp_path / f"n{nproc}" / f"infer_rank{rank}.pt")
            assert got["results"]["loss"] == pytest.approx(one["results"]["loss"], rel=1e-6)
            # Each batch is the same batch as on one process: same shapes, same order.
            assert torch.equal(got["predictions"], one["predictions"]), (nproc, rank)
