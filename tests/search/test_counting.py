"""How trials count toward n_trials, and what best_metric_fn reads."""

from __future__ import annotations

from typing import Any

import optuna
import pytest
from optuna.distributions import FloatDistribution
from optuna.trial import FrozenTrial, TrialState

from accmt_search import EvaluationMetrics
from accmt_search._driver import _fresh
from accmt_search._metrics import validation_loss
from accmt_search._study import RECORD, Tally, is_surplus, takes_a_place


def trial(number: int, state: TrialState, outcome: str | None = None) -> FrozenTrial:
    attrs: dict[str, Any] = {} if outcome is None else {RECORD: {"outcome": outcome}}
    made = optuna.trial.create_trial(
        state=state,
        value=1.0 if state == TrialState.COMPLETE else None,
        params={"x": 0.5},
        distributions={"x": FloatDistribution(0.0, 1.0)},
        user_attrs=attrs,
    )
    made.number = number
    return made


def test_what_takes_a_place() -> None:
    assert takes_a_place(trial(0, TrialState.COMPLETE, "complete"))
    assert takes_a_place(trial(0, TrialState.PRUNED, "pruned"))
    assert takes_a_place(trial(0, TrialState.FAIL, "failed"))  # failed by its own error
    assert takes_a_place(trial(0, TrialState.RUNNING))
    assert takes_a_place(trial(0, TrialState.WAITING))  # a retry, queued
    assert not takes_a_place(trial(0, TrialState.FAIL))  # cut off: its retry counts instead
    assert not takes_a_place(trial(0, TrialState.FAIL, "interrupted"))
    assert not takes_a_place(trial(0, TrialState.FAIL, "surplus"))


def test_the_tally_waits_for_running_trials_but_never_for_a_queued_retry() -> None:
    trials = [
        trial(0, TrialState.COMPLETE, "complete"),
        trial(1, TrialState.FAIL),
        trial(2, TrialState.RUNNING),
    ]
    tally = Tally.of(trials, count_running=True)
    assert (tally.finished, tally.running, tally.waiting) == (1, (2,), 0)
    assert tally.may_start(3)
    assert not tally.may_start(2)  # the last place is held by trial 2, running elsewhere
    # Without heartbeats a dead trial would hold its place forever: running ones do not count.
    assert Tally.of(trials, count_running=False).may_start(2)
    queued = Tally.of([*trials, trial(3, TrialState.WAITING)], count_running=True)
    assert queued.may_start(2)


def test_a_trial_asked_past_n_trials_by_a_racing_worker_is_surplus() -> None:
    trials = [
        trial(0, TrialState.COMPLETE, "complete"),
        trial(1, TrialState.FAIL),
        trial(2, TrialState.RUNNING),  # worker A's, asked a moment before
        trial(3, TrialState.RUNNING),  # worker B's
    ]
    assert not is_surplus(trials, 2, n_trials=2)
    assert is_surplus(trials, 3, n_trials=2)
    assert not is_surplus(trials, 3, n_trials=3)


def test_the_study_is_read_again_unless_the_asked_trial_is_new_in_a_free_place() -> None:
    done = [trial(0, TrialState.COMPLETE, "complete"), trial(1, TrialState.PRUNED, "pruned")]
    assert _fresh(done, 2)  # nothing asked since: a new trial in a free place
    assert _fresh([], 0)
    assert not _fresh(done, 3)  # another worker asked trial 2 meanwhile
    # A trial running may be cut off and queued again as the one asked; a waiting retry may
    # be the one asked: both need the study's current record.
    assert not _fresh([*done, trial(2, TrialState.RUNNING)], 3)
    assert not _fresh([*done, trial(2, TrialState.WAITING)], 3)


def test_evaluation_metrics_are_the_results_by_set() -> None:
    metrics = EvaluationMetrics({"validation": {"loss": 0.5, "accuracy": 0.9}})
    assert metrics["validation"]["accuracy"] == 0.9
    assert metrics == {"validation": {"loss": 0.5, "accuracy": 0.9}}
    with pytest.raises(KeyError):
        metrics["0"]
    with pytest.raises(KeyError):
        metrics["validation"]["valid_loss"]


def test_the_default_objective_is_the_validation_loss_over_the_sets() -> None:
    assert validation_loss(EvaluationMetrics({"a": {"loss": 1.0}, "b": {"loss": 3.0}})) == 2.0
    with pytest.raises(KeyError, match="no validation loss"):
        validation_loss(EvaluationMetrics({"a": {"accuracy": 1.0}}))
