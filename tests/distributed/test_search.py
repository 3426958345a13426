"""One search on 2 real processes: the main process alone talks to the study, and both
processes train the same parameters in every trial, prune together and fail together."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import optuna
import pytest
from optuna.trial import TrialState

from ._launch import torchrun

pytestmark = pytest.mark.distributed

WORKER = Path(__file__).resolve().parents[1] / "search" / "workers" / "search_worker.py"
# 400 training samples, 32 per process per batch on 2 processes: ceil(400 / 64) = 7 steps.
STEPS_PER_EPOCH = 7


def trained(out: Path, rank: int) -> list[dict[str, Any]]:
    lines = (out / f"trained_rank{rank}.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One job for both tests (a launch costs most in its processes importing torch and
    Accelerate): a search of 4 trials, one pruned and one failing, then a plain fit."""
    out = tmp_path_factory.mktemp("search") / "search"
    torchrun(
        str(WORKER),
        2,
        str(out),
        "--trials",
        "4",
        "--epochs",
        "2",
        "--prune-trial",
        "1",
        "--fail-trial",
        "2",
        "--then-fit",
    )
    return out


def test_both_processes_train_the_same_trials_and_the_study_has_n_trials(out: Path) -> None:
    study = optuna.load_study(study_name="accmt-search", storage=f"sqlite:///{out}/study.db")
    trials = study.get_trials()
    assert [t.state for t in trials] == [
        TrialState.COMPLETE,
        TrialState.PRUNED,
        TrialState.FAIL,
        TrialState.COMPLETE,
    ]
    assert trials[2].user_attrs["accmt_search"]["error"] == "ValueError: trial_2 fails on purpose"

    ranks = [trained(out, 0), trained(out, 1)]
    # The failed trial raised before any step, on both processes: no on_fit_end.
    assert [line["folder"] for line in ranks[0]] == ["trial_0", "trial_1", "trial_3"]
    # Both processes trained the very same configuration in each trial, and stopped together.
    assert ranks[0] == ranks[1]
    for line, trial in zip(ranks[0], (trials[0], trials[1], trials[3]), strict=True):
        assert line["hps"]["optimizer_kwargs"]["lr"] == trial.params["optimizer_kwargs.lr"]
        assert line["hidden"] == trial.params["module.hidden"]
    steps = [line["global_step"] for line in ranks[0]]
    assert steps == [2 * STEPS_PER_EPOCH, STEPS_PER_EPOCH, 2 * STEPS_PER_EPOCH]


def test_a_fit_after_the_search_in_the_same_job_trains_on_both_processes(out: Path) -> None:
    """The search made the process group, and left none behind (after a pruned and a failed
    trial too); the fit makes its own, and trains its one epoch on both processes."""
    for rank in range(2):
        after = json.loads((out / f"after_rank{rank}.json").read_text())
        assert after == {"world": 2, "global_step": STEPS_PER_EPOCH}
