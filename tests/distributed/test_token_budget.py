"""Issue 41's must-show: a ``TokenBudgetBatchSampler`` as the Trainer's ``batch_sampler`` on two
processes through torchrun. Every sample is read once per epoch (the processes' records
unioned), each process reads as many batches, no batch holds more than ``max_tokens``; a run
SIGKILLed mid-epoch after a checkpoint and resumed reads the uninterrupted run's batches and
ends with its weights bit for bit.

Two launches: the first trains the uninterrupted run and then the one it kills, the second
resumes the killed one (see workers/token_budget_worker.py)."""

from __future__ import annotations

import json
import signal
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import torch

from ._launch import launch

pytestmark = pytest.mark.distributed

MAX_TOKENS, SAMPLES, EPOCHS = 40, 60, 2
# 18 batches per epoch (17 formed, one split for two processes): 9 optimizer steps per epoch
# on each process, checkpoints at steps 5, 10 and 15. Killed after step 8, the run resumes from
# step 5, five batches into the first epoch.
KILL = 8


def records(run: Path, rank: int) -> list[dict[str, Any]]:
    lines = (run / f"batches_rank{rank}.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("token_budget")
    died = launch("token_budget_worker.py", 2, str(out), "--kill-at-step", str(KILL))
    killed = died.returncode == -signal.SIGKILL or "SIGKILL" in died.stderr
    assert killed, f"the run was not killed at step {KILL}: {died.stderr[-3000:]}"
    assert (out / "full" / "final_rank1.pt").exists(), died.stderr[-3000:]
    assert not list((out / "killed").glob("final_rank*.pt"))
    resumed = launch("token_budget_worker.py", 2, str(out))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    return out


def test_every_sample_once_per_epoch_as_many_batches_per_process_within_budget(
    runs: Path,
) -> None:
    full = runs / "full"
    planned = json.loads((full / "plan.json").read_text())["batches"]
    assert planned % 2 == 0
    per_rank = [records(full, rank) for rank in range(2)]
    for epoch in range(EPOCHS):
        shares = [[r for r in rank if r["epoch"] == epoch] for rank in per_rank]
        assert [len(share) for share in shares] == [planned // 2] * 2
        read = Counter(index for share in shares for r in share for index in r["indices"])
        assert sorted(read) == list(range(SAMPLES))
        assert set(read.values()) == {1}
    assert max(r["tokens"] for rank in per_rank for r in rank) <= MAX_TOKENS
    first, second = ([r["indices"] for r in per_rank[0] if r["epoch"] == e] for e in (0, 1))
    assert first != second, "the epochs were not shuffled"


def test_killed_mid_epoch_and_resumed_reads_the_same_batches_and_ends_bit_identical(
    runs: Path,
) -> None:
    full, killed = runs / "full", runs / "killed"
    for rank in range(2):
        expected = {r["step"]: r for r in records(full, rank)}
        got = records(killed, rank)
        steps = [r["step"] for r in got]
        assert len(steps) > len(set(steps)), f"rank {rank}: no step was redone after the kill"
        assert set(steps) == set(expected)
        for record in got:
            assert record == expected[record["step"]], f"rank {rank}: step {record['step']}"
        want = torch.load(full / f"final_rank{rank}.pt")["weights"]
        have = torch.load(killed / f"final_rank{rank}.pt")["weights"]
        for name, weight in want.items():
            assert torch.equal(weight, have[name]), f"rank {rank}: {name} differs"
