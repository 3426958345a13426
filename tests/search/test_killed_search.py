"""A search SIGKILLed in the middle of a trial, run again: it ends with exactly n_trials
finished, none lost, and the cut trial resumed from its checkpoint."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import optuna
from optuna.trial import TrialState

WORKER = Path(__file__).parent / "workers" / "search_worker.py"
STEPS_PER_EPOCH = 13  # 400 training samples in batches of 32
EPOCHS = 3


def run_worker(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    command = [sys.executable, str(WORKER), *args, "--epochs", str(EPOCHS)]
    return subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)


def test_a_killed_search_run_again_finishes_every_trial_once(tmp_path: Path) -> None:
    out = tmp_path / "search"
    # In the third epoch of trial 5 (or of the first later trial that gets there unpruned),
    # after the checkpoint that ended its second epoch.
    kill_step = 2 * STEPS_PER_EPOCH + 3
    first = run_worker(
        str(out), "--trials", "12", "--kill-from-trial", "5", "--kill-step", str(kill_step)
    )
    assert first.returncode == -signal.SIGKILL, first.stderr[-3000:]
    second = run_worker(str(out), "--trials", "12")
    assert second.returncode == 0, second.stderr[-3000:]
    assert 'RESULT {"finished": 12' in second.stdout

    study = optuna.load_study(study_name="accmt-search", storage=f"sqlite:///{out}/study.db")
    trials = study.get_trials()
    ended = [t for t in trials if t.state in (TrialState.COMPLETE, TrialState.PRUNED)]
    assert len(ended) == 12
    (cut,) = [t for t in trials if t.state == TrialState.FAIL]
    assert cut.number >= 5
    assert "accmt_search" not in cut.user_attrs  # it never ended: the kill cut it off
    (retry,) = [t for t in ended if t.user_attrs["accmt_search"]["retry_of"] is not None]
    record = retry.user_attrs["accmt_search"]
    # The retry ran the cut trial's parameters in its folder, from its last checkpoint.
    assert record["retry_of"] == cut.number
    assert retry.params == cut.params
    assert record["folder"] == f"trial_{cut.number}"
    assert record["resumed_from_step"] == 2 * STEPS_PER_EPOCH
    assert record["optimizer_steps"] == record["global_step"] - 2 * STEPS_PER_EPOCH
    if retry.state == TrialState.COMPLETE:
        assert record["global_step"] == EPOCHS * STEPS_PER_EPOCH
    # None lost, none run twice: every other trial number ended once, in its own folder.
    assert sorted(t.number for t in ended) == [n for n in range(13) if n != cut.number]
    folders = [t.user_attrs["accmt_search"]["folder"] for t in ended]
    assert sorted(folders) == sorted(f"trial_{n}" for n in range(13) if n != retry.number)
    trained = (out / "trained_rank0.jsonl").read_text().splitlines()
    assert len(trained) == 12  # the cut attempt died before its on_fit_end
    assert sum('"resumed_from": 26' in line for line in trained) == 1
