"""best_metric_fn is checked before trials spend on it: a name that nothing reports stops the
search at once, naming the set, the key and the closest name; the objective is named after
what it reads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from optuna.trial import TrialState

from accmt_callbacks import Callback
from accmt_search import EvaluationMetrics, MetricNameError, SearchConfigError
from accmt_search._metrics import validation_loss
from accmt_search._objective import check_objective, read_objective
from accmt_search._study import Tally

from .test_search import Data, record, search


class Steps(Callback):
    """Counts the optimizer steps of every trial (each trial gets a copy: counts in a file)."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)

    def on_after_optimizer_step(self, optimizer: Any) -> None:
        with open(self.path, "a", encoding="utf-8") as stream:
            stream.write("step\n")


def test_a_misspelt_metric_stops_the_search_before_trial_0_trains(
    data: Data, tmp_path: Path
) -> None:
    steps = tmp_path / "steps.txt"
    found = search(data, tmp_path / "search", callbacks=[Steps(steps)])
    with pytest.raises(SearchConfigError) as caught:
        found.optimize(lambda m: m["validation"]["acc"], "maximize", n_trials=5, plots=False)
    message = str(caught.value)
    assert message.startswith("optimize(best_metric_fn=...): the objective reads ")
    assert "metrics['validation']['acc'], but validation set 'validation' reports only " in message
    assert "['accuracy', 'loss'] (did you mean 'accuracy'?)" in message
    assert "stopped at trial 0, which does not count toward n_trials" in message
    assert not steps.exists()  # not one optimizer step trained
    assert found.study is not None
    (trial,) = found.study.get_trials()  # not five failures in turn
    assert trial.state == TrialState.FAIL
    assert record(trial)["outcome"] == "invalid"
    assert Tally.of([trial], count_running=False).finished == 0
    # Corrected, the search continues: n_trials counts from no finished trial.
    result = search(data, tmp_path / "search").optimize(
        lambda m: m["validation"]["accuracy"], "maximize", n_trials=1, plots=False
    )
    assert (result.trial_number, result.finished) == (1, 1)


def test_a_misspelt_set_is_named_with_the_sets(data: Data, tmp_path: Path) -> None:
    found = search(data, tmp_path)
    match = r"metrics\['valid'\], but the validation sets are \['validation'\] \(did you mean "
    with pytest.raises(SearchConfigError, match=match + r"'validation'\?\)"):
        found.optimize(lambda m: m["valid"]["accuracy"], "maximize", n_trials=3, plots=False)


def test_without_a_sanity_check_the_first_evaluation_stops_it(data: Data, tmp_path: Path) -> None:
    steps = tmp_path / "steps.txt"
    found = search(data, tmp_path / "search", callbacks=[Steps(steps)], sanity_check=False)
    with pytest.raises(SearchConfigError, match="did you mean 'accuracy'"):
        found.optimize(lambda m: m["validation"]["acc"], "maximize", n_trials=5, plots=False)
    assert found.study is not None
    assert len(found.study.get_trials()) == 1
    assert len(steps.read_text().splitlines()) == 13  # the first epoch, up to its evaluation


def test_evaluation_metrics_name_the_closest_key() -> None:
    metrics = EvaluationMetrics({"clean": {"loss": 0.2, "accuracy": 0.9}})
    with pytest.raises(KeyError) as caught:
        metrics["clean"]["acuracy"]
    assert isinstance(caught.value, MetricNameError)
    assert str(caught.value) == (
        "the objective reads metrics['clean']['acuracy'], but validation set 'clean' reports "
        "only ['accuracy', 'loss'] (did you mean 'accuracy'?); validation_step returns the loss "
        "as 'loss' and each metric under its name"
    )
    assert metrics["clean"].get("acuracy") is None  # .get stays a dict's


def error_rate(metrics: EvaluationMetrics) -> float:
    return 1 - metrics["validation"]["accuracy"]


def test_the_objective_is_named_after_what_it_reads() -> None:
    reported = {"validation": ["accuracy", "loss"]}
    assert check_objective(lambda m: m["validation"]["accuracy"], reported) == (
        "validation accuracy"
    )
    assert check_objective(validation_loss, reported) == "validation loss"
    assert check_objective(error_rate, reported) == "error_rate"  # not what it read, as it is
    assert check_objective(lambda m: 1 - m["validation"]["loss"], reported) == "objective"
    two = {"clean": ["loss"], "noisy": ["f1", "loss"]}
    assert check_objective(lambda m: m["noisy"]["f1"], two) == "f1 (noisy)"
    assert check_objective(validation_loss, two) == "validation loss (mean of 2 sets)"
    # A failure of another kind on stand-in values is left to the first true evaluation.
    assert check_objective(lambda m: 1 / (m["validation"]["loss"] - 10), reported) is not None
    assert check_objective(lambda m: int("x"), reported) is None
    value, name = read_objective(lambda m: m["validation"]["loss"], {"validation": {"loss": 0.3}})
    assert (value, name) == (0.3, "validation loss")
