"""Kill a run with SIGKILL at random steps and inside checkpoint writes, resume it, and get
the uninterrupted run's final weights bit for bit: on one process and through torchrun.

Most of a launch's cost is its processes importing torch and Accelerate, so on each number of
processes the runs share launches (see ``campaign``): one launch trains the uninterrupted runs
and then dies in a killed run's first kill, each launch after it makes one more kill, and the
last resumes every killed run to its end, and then a copy of the uninterrupted run's
checkpoints with one byte changed. Each test then checks its own run from what every launch
wrote: which launch killed it where, its final weights, which process hashed which file of a
checkpoint it resumed, the refusal of the damaged one.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import torch

from ._launch import WORKERS, free_port

pytestmark = pytest.mark.distributed

WORKER = str(WORKERS / "resume_worker.py")
# 200 samples, batch 8: 25 batches per process per epoch on one process, 13 on two; with
# accumulation 2, 13 (resp. 7) optimizer steps per epoch, 3 epochs.
STEPS = {1: 39, 2: 21}
CURRICULUM_STEPS = 24


def launch(nproc: int, *args: str) -> subprocess.CompletedProcess[str]:
    if nproc == 1:
        command = [sys.executable, WORKER, *args]
    else:
        command = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            f"--nproc_per_node={nproc}",
            f"--master_port={free_port()}",
            "--max-restarts=0",
            WORKER,
            *args,
        ]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)


def final_weights(out: Path, nproc: int) -> list[dict[str, object]]:
    return [torch.load(out / f"final_rank{rank}.pt") for rank in range(nproc)]


@dataclass
class Killed:
    """A run killed three times, each time by one launch, and resumed to its end by another."""

    out: Path
    options: list[str]
    kills: list[list[str]]
    story: str

    def arguments(self, *kill: str) -> list[str]:
        return [str(self.out), *self.options, *kill]


@dataclass
class Campaign:
    """Every launch on ``nproc`` processes, and how each ended."""

    nproc: int
    root: Path
    plan: list[list[list[str]]] = field(default_factory=list)
    ended: list[subprocess.CompletedProcess[str]] = field(default_factory=list)
    killed: dict[str, Killed] = field(default_factory=dict)

    def check_launches(self, name: str, steps: int) -> None:
        """Each launch that ran the run killed it where it was told to, before any process
        finished (so before any wrote its final weights); the last finished it on each."""
        killed = self.killed[name]
        launches = [
            number
            for number, runs in enumerate(self.plan)
            if any(run[0] == str(killed.out) for run in runs)
        ]
        *killing, last = launches
        logged = [
            json.loads(line)
            for rank in range(self.nproc)
            for line in (killed.out / f"events_rank{rank}.jsonl").read_text().splitlines()
        ]
        assert {event["launch"] for event in logged} == set(launches), killed.story
        for number, kill in zip(killing, killed.kills, strict=True):
            here = [event for event in logged if event["launch"] == number]
            ended = self.ended[number]
            story = f"{killed.story}: launch {number} ({kill})\n{ended.stderr[-3000:]}"
            # One process dies by its own SIGKILL; on two, torchrun then stops the other.
            assert ended.returncode == (-signal.SIGKILL if self.nproc == 1 else 1), story
            assert [event["event"] for event in here].count("start") == self.nproc, story
            where = "step" if kill[0] == "--kill-at-step" else "checkpoint"
            kills = {event["at"] for event in here if event["event"] == "kill"}
            assert kills == {f"{where} {kill[1]}"}, story
            assert "end" not in [event["event"] for event in here], story
        done = self.ended[last]
        assert done.returncode == 0, f"{killed.story}\n{done.stderr[-3000:]}"
        ends = [event["global_step"] for event in logged if event["event"] == "end"]
        assert ends == [steps] * self.nproc, killed.story

    def out(self, name: str) -> Path:
        return self.root / name


def run_campaign(root: Path, nproc: int) -> Campaign:
    seed = random.randrange(10**6)
    rng = random.Random(seed)
    total = STEPS[nproc]
    ran = Campaign(nproc, root)
    for name, mode in (("sync", []), ("async", ["--async"])):
        # Two kills after random steps, then one inside the second checkpoint the next launch
        # writes: each kill comes after the step the run resumes from (checkpoints every 3
        # steps), and that last launch still has two checkpoints to write before the run ends.
        kills = sorted(rng.sample(range(2, total - 8), 2))
        story = f"{name}, seed {seed}: SIGKILL after steps {kills} and inside the 2nd checkpoint"
        ran.killed[name] = Killed(
            root / name,
            ["--ema", *mode],
            [
                ["--kill-at-step", str(kills[0])],
                ["--kill-at-step", str(kills[1])],
                ["--kill-in-checkpoint", "2"],
            ],
            story,
        )
    # Stages end at steps 9 and 17 of 24; checkpoints every 3 steps. The first kill resumes
    # from step 6 and crosses stage 0's end; the second resumes from step 9, the stage's end
    # itself; the third dies inside the checkpoint of step 15 and resumes in stage 1's cut pass
    # from step 12.
    ran.killed["curriculum"] = Killed(
        root / "curriculum",
        ["--curriculum"],
        [["--kill-at-step", "8"], ["--kill-at-step", "11"], ["--kill-in-checkpoint", "2"]],
        "curriculum: SIGKILL after steps 8 and 11 and inside the 2nd checkpoint",
    )
    uninterrupted = [
        [str(ran.out("uninterrupted")), "--ema"],
        [str(ran.out("curriculum_uninterrupted")), "--curriculum"],
    ]
    # A kill ends its launch: each launch makes one, the killed runs taking turns.
    kills = [run.arguments(*run.kills[turn]) for turn in range(3) for run in ran.killed.values()]
    damaged = [str(ran.out("damaged")), "--ema", "--damaged"]
    ran.plan = [
        [*uninterrupted, kills[0]],
        *([kill] for kill in kills[1:]),
        [*(run.arguments() for run in ran.killed.values()), damaged],
    ]
    plan = root / "plan.json"
    plan.write_text(json.dumps(ran.plan))
    for number in range(len(ran.plan)):
        if number == len(ran.plan) - 1:
            damage(ran.out("uninterrupted"), ran.out("damaged"))
        ran.ended.append(launch(nproc, "--plan", str(plan), "--launch", str(number)))
    return ran


def damage(finished: Path, out: Path) -> None:
    """``finished``'s checkpoints copied into ``out``, one byte of the newest one's weights
    changed (their size kept)."""
    checkpoints = shutil.copytree(finished / "run" / "checkpoints", out / "run" / "checkpoints")
    weights = max(checkpoints.glob("checkpoint_*")) / "accelerate" / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF
    weights.write_bytes(bytes(data))


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> Callable[[int], Campaign]:
    """Every run on ``nproc`` processes, launched once for all the tests."""
    campaigns: dict[int, Campaign] = {}

    def run(nproc: int) -> Campaign:
        if nproc not in campaigns:
            campaigns[nproc] = run_campaign(tmp_path_factory.mktemp(f"campaign_{nproc}"), nproc)
        return campaigns[nproc]

    return run


def assert_same_weights(expected: Path, got: Path, nproc: int, steps: int, story: str) -> None:
    for rank, (wanted, found) in enumerate(
        zip(final_weights(expected, nproc), final_weights(got, nproc), strict=True)
    ):
        assert found["state"]["global_step"] == steps, f"{story}: rank {rank}"
        assert found["state"]["epoch"] == wanted["state"]["epoch"], f"{story}: rank {rank}"
        for name, weight in wanted["weights"].items():
            assert torch.equal(weight, found["weights"][name]), f"{story}: {name} differs"


@pytest.mark.parametrize("background", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("nproc", [1, 2])
def test_killed_and_resumed_run_matches_uninterrupted_bit_for_bit(
    nproc: int, background: bool, campaign: Callable[[int], Campaign]
) -> None:
    ran = campaign(nproc)
    name = "async" if background else "sync"
    ran.check_launches(name, STEPS[nproc])
    killed = ran.killed[name]
    assert_same_weights(ran.out("uninterrupted"), killed.out, nproc, STEPS[nproc], killed.story)
    # These runs keep a weight average (ema_decay): it resumed bit for bit too.
    names = final_weights(killed.out, nproc)[0]["weights"]
    assert any(name.startswith("average/") for name in names)


@pytest.mark.parametrize("nproc", [1, 2])
def test_a_killed_curriculum_resumes_to_the_uninterrupted_weights(
    nproc: int, campaign: Callable[[int], Campaign]
) -> None:
    ran = campaign(nproc)
    ran.check_launches("curriculum", CURRICULUM_STEPS)
    killed = ran.killed["curriculum"]
    expected = ran.out("curriculum_uninterrupted")
    assert_same_weights(expected, killed.out, nproc, CURRICULUM_STEPS, killed.story)


def events(out: Path, nproc: int) -> list[dict[str, object]]:
    return [
        {**json.loads(line), "rank": rank}
        for rank in range(nproc)
        for line in (out / f"events_rank{rank}.jsonl").read_text().splitlines()
    ]


@pytest.mark.parametrize("nproc", [1, 2])
def test_each_resume_hashes_each_file_of_its_checkpoint_once_on_the_machine(
    nproc: int, campaign: Callable[[int], Campaign]
) -> None:
    ran = campaign(nproc)
    for name, killed in ran.killed.items():
        hashed = [e for e in events(killed.out, nproc) if e["event"] == "hashed"]
        # Only the machine's local main process (rank 0) reads them; the other waits for it.
        assert {e["rank"] for e in hashed} == {0}, killed.story
        resumed = {(e["launch"], e["checkpoint"]) for e in hashed}
        ran_in = [
            n for n, runs in enumerate(ran.plan) if any(r[0] == str(killed.out) for r in runs)
        ]
        # A launch resumed the run from one checkpoint (the last one surely; one after a kill
        # before the first checkpoint started afresh).
        launches = [launch for launch, _ in resumed]
        assert len(set(launches)) == len(launches), (name, resumed)
        assert ran_in[-1] in launches, (name, resumed)
        assert set(launches) <= set(ran_in[1:]), (name, resumed)
        for launch_number, checkpoint in resumed:
            folder = killed.out / "run" / "checkpoints" / str(checkpoint)
            listed = json.loads((folder / "manifest.json").read_text())["files"]
            counted = Counter(
                e["file"]
                for e in hashed
                if (e["launch"], e["checkpoint"]) == (launch_number, checkpoint)
            )
            assert counted == dict.fromkeys(listed, 1), (name, launch_number, checkpoint)


@pytest.mark.parametrize("nproc", [1, 2])
def test_a_damaged_file_is_refused_by_name_on_every_process(
    nproc: int, campaign: Callable[[int], Campaign]
) -> None:
    ran = campaign(nproc)
    assert ran.ended[-1].returncode == 0, ran.ended[-1].stderr[-3000:]
    said = events(ran.out("damaged"), nproc)
    refused = [e for e in said if e["event"] == "refused"]
    assert [e["rank"] for e in refused] == list(range(nproc))
    for event in refused:
        assert event["error"] == (
            "accelerate/model.safetensors is missing, truncated or altered"
        ), event
    # Hashed on the machine once, by its local main process, up to the damaged file.
    hashed = [e for e in said if e["event"] == "hashed"]
    assert {e["rank"] for e in hashed} == {0}
    assert Counter(e["file"] for e in hashed)["accelerate/model.safetensors"] == 1


def test_a_finished_run_resumes_to_nothing(
    tmp_path: Path, campaign: Callable[[int], Campaign]
) -> None:
    finished = shutil.copytree(campaign(1).out("uninterrupted"), tmp_path / "finished")
    before = torch.load(finished / "final_rank0.pt")
    again = launch(1, str(finished), "--ema")
    assert again.returncode == 0
    assert "already finished" in again.stderr
    after = torch.load(finished / "final_rank0.pt")
    for name, weight in before["weights"].items():
        assert torch.equal(weight, after["weights"][name])
