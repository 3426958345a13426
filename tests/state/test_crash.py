"""A writer killed with SIGKILL at random moments never leaves a damaged state file."""

from __future__ import annotations

import os
import random
import signal
import statistics
import time
from pathlib import Path

from accmt_state import TrainingState

SECONDS = 3.0
MIN_KILLS = 20
# About 80 kB a file, so that a kill often lands while the bytes are being written.
METRICS = {"validation": {f"metric_{i}": i / 7 for i in range(2000)}}


def start_writer(path: Path, state: TrainingState) -> int:
    """A forked child that rewrites ``state`` in a loop, counting up its global step. (A fork
    starts in a millisecond, with the state already built, so there is time for many kills.)"""
    pid = os.fork()
    if pid == 0:  # the child never returns into pytest
        try:
            while True:
                state.global_step += 1
                state.save(path)
        finally:
            os._exit(1)
    return pid


def kill(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status), "the writer ended before it was killed"
    assert os.WTERMSIG(status) == signal.SIGKILL


def seconds_per_save(path: Path) -> float:
    """How long one save takes here (fsync makes it vary a lot between disks)."""
    state, samples = TrainingState(additional_metrics=METRICS), []
    for _ in range(3):
        start = time.perf_counter()
        state.save(path)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def test_sigkill_at_random_moments_leaves_a_complete_loadable_state(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    longest_wait = 3 * seconds_per_save(path)  # so that kills land before, in and after saves
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    last_step, kills = 0, 0
    deadline = time.monotonic() + SECONDS
    while kills < MIN_KILLS or time.monotonic() < deadline:
        pid = start_writer(path, TrainingState(global_step=last_step, additional_metrics=METRICS))
        time.sleep(rng.uniform(0.0, longest_wait))
        kill(pid)
        kills += 1
        state = TrainingState.load(path)  # raises StateError on a half-written file
        assert state.global_step >= last_step, f"seed {seed}: the step went back"
        last_step = state.global_step
    assert last_step > 0, f"seed {seed}: no writer finished a save in {kills} runs"
    leftovers = {p.name for p in tmp_path.iterdir()} - {"state.json"}
    assert all(name.startswith(".state.json.") for name in leftovers), leftovers
