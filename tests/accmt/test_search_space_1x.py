"""accmt 1.x's set_parameters through accmt.HyperParameterSearch: its shorthands and defaults
become optuna distributions under the 1.x names, ranges are checked and name the parameter,
and a default the chosen optimizer or scheduler does not take is dropped."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import optuna
import pytest
from accelerate.state import AcceleratorState
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
from torch.utils.data import TensorDataset

from accmt import HyperParameterSearch, SearchSpaceError
from accmt._one_x._search_space import ParametersSpace
from accmt_trainer import HyperParameters
from tests.search._data import DigitsMLP, digits

ONE_X_SNIPPET: dict[str, Any] = {
    "train_batch_size": [16, 32, 64],
    "epochs": 3,
    "learning_rate": [1e-4, 1e-2],
    "weight_decay": [0.0, 0.1],
    "scheduler": {"linear": "LinearWithWarmup", "cosine": "CosineWithWarmup"},
    "warmup_ratio": 0.1,
    "optimizer": "AdamW",
}


@pytest.fixture(autouse=True)
def fresh_accelerate_state() -> Iterator[None]:
    yield
    AcceleratorState._reset_state(reset_partial_state=True)


def from_parameters(given: dict[str, Any]) -> ParametersSpace:
    """The space of ``set_parameters(**given)``."""
    return ParametersSpace.of(given)


def sampled(space: ParametersSpace, params: dict[str, Any] | None = None) -> tuple[Any, Any]:
    """One trial of ``space`` on an in-memory study: (its distributions, its HyperParameters)."""
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    if params is not None:
        study.enqueue_trial(params)
    trial = study.ask()
    hps = space.hyperparameters(space.draw(trial))
    return study.trials[-1].distributions, hps


def test_the_1x_shorthands_become_optuna_distributions() -> None:
    distributions, hps = sampled(from_parameters(ONE_X_SNIPPET))
    assert distributions == {
        "train_batch_size": CategoricalDistribution([16, 32, 64]),
        "learning_rate": FloatDistribution(1e-4, 1e-2, log=True),
        "weight_decay": FloatDistribution(0.0, 0.1),
        "scheduler": CategoricalDistribution(["linear", "cosine"]),
    }
    assert hps.epochs == 3
    assert hps.optimizer == "AdamW"
    assert hps.scheduler in ("LinearWithWarmup", "CosineWithWarmup")
    assert hps.scheduler_kwargs == {"warmup_ratio": 0.1}
    assert set(hps.optimizer_kwargs) == {"lr", "betas", "eps", "weight_decay"}
    assert hps.batch_size[0] == hps.batch_size[1]  # type: ignore[index]


def test_int_ranges_tuples_and_the_default_learning_rate() -> None:
    space = from_parameters({"epochs": [2, 5], "beta1": (0.8, 0.9), "eval_batch_size": 64})
    distributions, hps = sampled(space)
    assert distributions["epochs"] == IntDistribution(2, 5)
    assert distributions["beta1"] == CategoricalDistribution([0.8, 0.9])
    # 1.x's default range was [1e-3, 1e-7], reversed; now valid and on a log scale.
    assert distributions["learning_rate"] == FloatDistribution(1e-7, 1e-3, log=True)
    assert hps.batch_size == (1, 64)


@pytest.mark.parametrize(
    ("given", "key", "problem"),
    [
        ({"learning_rate": [1e-2, 1e-4]}, "learning_rate", "low must be below high"),
        ({"learning_rate": [-1.0, 1e-2]}, "learning_rate", "positive"),
        ({"weight_decay": [-0.1, 0.1]}, "weight_decay", "must be a number >= 0"),
        ({"beta1": [0.5, 1.5]}, "beta1", "[0, 1)"),
        ({"epochs": [0, 3]}, "epochs", "whole number >= 1"),
        ({"epochs": [1.5, 3.0]}, "epochs", "whole"),
        ({"train_batch_size": [16, 0]}, "train_batch_size", ">= 1"),
        ({"warmup_ratio": [0.0, 2.0]}, "warmup_ratio", "[0, 1]"),
        ({"learning_rate": [1e-4, 1e-3, 1e-2]}, "learning_rate", "two numbers"),
    ],
)
def test_set_parameters_checks_ranges_and_names_the_parameter(
    given: dict[str, Any], key: str, problem: str
) -> None:
    with pytest.raises(SearchSpaceError) as caught:
        from_parameters(given)
    assert caught.value.key == key
    assert problem in caught.value.problem
    assert isinstance(caught.value, ValueError)


def test_any_optimizer_of_the_registry_and_defaults_it_does_not_take_are_dropped() -> None:
    for optimizer in ("SGD", "RMSprop", "Adagrad", "Adam", "NAdam"):
        _, hps = sampled(from_parameters({"optimizer": optimizer}))
        assert hps.optimizer == optimizer
        assert "lr" in hps.optimizer_kwargs
    _, sgd = sampled(from_parameters({"optimizer": "SGD"}))
    # 1.x's betas and eps are Adam's: left at their defaults, they are not given to SGD.
    assert set(sgd.optimizer_kwargs) == {"lr", "weight_decay"}


def test_a_default_warmup_is_dropped_for_a_scheduler_without_one() -> None:
    space = from_parameters({"scheduler": "ConstantLR", "learning_rate": [1e-3, 1e-2]})
    _, hps = sampled(space)
    assert hps.scheduler == "ConstantLR"
    assert hps.scheduler_kwargs == {}


def test_a_value_the_optimizer_does_not_take_is_an_error_when_given() -> None:
    # Checked when the space is set, before any trial.
    with pytest.raises(SearchSpaceError) as caught:
        from_parameters({"optimizer": "SGD", "beta1": [0.8, 0.9]})
    assert caught.value.key == "beta1"
    assert "betas" in caught.value.problem


def test_every_choice_is_resolved_before_any_trial(tmp_path: Path) -> None:
    data: tuple[TensorDataset, TensorDataset] = digits()
    search = HyperParameterSearch(DigitsMLP, *data, output_dir=tmp_path, log_with=None)
    with pytest.raises(SearchSpaceError) as caught:
        search.set_parameters(scheduler={"ok": "LinearWithWarmup", "bad": "StepLR"})
    # StepLR needs a step_size that no parameter gives.
    assert caught.value.key == "scheduler"
    assert "step_size" in caught.value.problem
    assert search.space is None
    with pytest.raises(SearchSpaceError, match="no parameter is searched"):
        search.set_parameters(learning_rate=1e-3)


def test_resolved_hyperparameters_round_trip_through_1x_yaml(tmp_path: Path) -> None:
    _, hps = sampled(from_parameters(ONE_X_SNIPPET))
    hps.to_yaml(tmp_path / "best.yaml")
    assert HyperParameters.from_yaml(tmp_path / "best.yaml") == hps
    assert (tmp_path / "best.yaml").read_text().startswith("hps:\n")
