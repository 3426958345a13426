"""The search space: 1.x's set_parameters, a dict or YAML file, and space(trial), read the same
way, checked before any trial, and turned into the HyperParameters each trial trains with."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import optuna
import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
from torch.utils.data import TensorDataset

from accmt_search import HyperParameterSearch, SearchSpaceError
from accmt_search._resolve import check_module_arguments, resolve
from accmt_search._space import FunctionSpace, SearchSpace, Space, from_parameters, read_space
from accmt_trainer import HyperParameters

from ._data import DigitsMLP

ONE_X_SNIPPET: dict[str, Any] = {
    "train_batch_size": [16, 32, 64],
    "epochs": 3,
    "learning_rate": [1e-4, 1e-2],
    "weight_decay": [0.0, 0.1],
    "scheduler": {"linear": "LinearWithWarmup", "cosine": "CosineWithWarmup"},
    "warmup_ratio": 0.1,
    "optimizer": "AdamW",
}


def sampled(space: Space, params: dict[str, Any] | None = None) -> tuple[Any, Any]:
    """One trial of ``space`` on an in-memory study: (its distributions, its config)."""
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    if params is not None:
        study.enqueue_trial(params)
    trial = study.ask()
    config = resolve(space.sample(trial))
    return study.trials[-1].distributions, config


def test_the_1x_shorthands_become_optuna_distributions() -> None:
    distributions, config = sampled(from_parameters(ONE_X_SNIPPET))
    assert distributions == {
        "train_batch_size": CategoricalDistribution([16, 32, 64]),
        "learning_rate": FloatDistribution(1e-4, 1e-2, log=True),
        "weight_decay": FloatDistribution(0.0, 0.1),
        "scheduler": CategoricalDistribution(["linear", "cosine"]),
    }
    hps = config.hps
    assert hps.epochs == 3
    assert hps.optimizer == "AdamW"
    assert hps.scheduler in ("LinearWithWarmup", "CosineWithWarmup")
    assert hps.scheduler_kwargs == {"warmup_ratio": 0.1}
    assert set(hps.optimizer_kwargs) == {"lr", "betas", "eps", "weight_decay"}
    assert hps.batch_size[0] == hps.batch_size[1]  # type: ignore[index]


def test_int_ranges_tuples_and_the_default_learning_rate() -> None:
    space = from_parameters({"epochs": [2, 5], "beta1": (0.8, 0.9), "eval_batch_size": 64})
    distributions, config = sampled(space)
    assert distributions["epochs"] == IntDistribution(2, 5)
    assert distributions["beta1"] == CategoricalDistribution([0.8, 0.9])
    # 1.x's default range was [1e-3, 1e-7], reversed; now valid and on a log scale.
    assert distributions["learning_rate"] == FloatDistribution(1e-7, 1e-3, log=True)
    assert config.hps.batch_size == (1, 64)


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
        _, config = sampled(from_parameters({"optimizer": optimizer}))
        assert config.hps.optimizer == optimizer
        assert "lr" in config.hps.optimizer_kwargs
    _, sgd = sampled(from_parameters({"optimizer": "SGD"}))
    # 1.x's betas and eps are Adam's: left at their defaults, they are not given to SGD.
    assert set(sgd.hps.optimizer_kwargs) == {"lr", "weight_decay"}


def test_a_default_warmup_is_dropped_for_a_scheduler_without_one() -> None:
    space = SearchSpace.build(
        {"scheduler": "StepLR", "scheduler_kwargs.step_size": 2, "learning_rate": [1e-3, 1e-2]}
    )
    _, config = sampled(space)
    assert config.hps.scheduler == "StepLR"
    assert config.hps.scheduler_kwargs == {"step_size": 2}


def test_a_value_the_optimizer_does_not_take_is_an_error_when_given() -> None:
    space = from_parameters({"optimizer": "SGD", "beta1": [0.8, 0.9]})
    with pytest.raises(SearchSpaceError) as caught:
        sampled(space)
    assert caught.value.key == "beta1"
    assert "betas" in caught.value.problem


def test_dict_space_over_any_field_optimizer_argument_and_module_argument() -> None:
    space = read_space(
        {
            "optimizer": "SGD",
            "optimizer_kwargs": {"momentum": {"type": "float", "low": 0.0, "high": 0.9}},
            "batch_size": {"type": "categorical", "choices": [8, 16]},
            "module.hidden": {"type": "int", "low": 16, "high": 64, "step": 16},
            "module": {"dropout": {"type": "float", "low": 0.0, "high": 0.5}},
            "optimizer_kwargs.nesterov": True,
        }
    )
    distributions, config = sampled(space)
    assert distributions["optimizer_kwargs.momentum"] == FloatDistribution(0.0, 0.9)
    assert distributions["module.hidden"] == IntDistribution(16, 64, step=16)
    assert set(config.module_kwargs) == {"hidden", "dropout"}
    assert config.module_kwargs["hidden"] in (16, 32, 48, 64)
    assert config.hps.optimizer_kwargs["nesterov"] is True
    assert config.hps.batch_size in (8, 16)


def test_choices_with_labels_for_values_optuna_cannot_store() -> None:
    space = read_space(
        {
            "optimizer_kwargs.betas": {
                "type": "categorical",
                "choices": {"fast": (0.8, 0.9), "slow": (0.9, 0.999)},
            }
        }
    )
    distributions, config = sampled(space, {"optimizer_kwargs.betas": "slow"})
    assert distributions["optimizer_kwargs.betas"] == CategoricalDistribution(["fast", "slow"])
    assert config.hps.optimizer_kwargs["betas"] == (0.9, 0.999)
    with pytest.raises(SearchSpaceError, match=r"give .* a label"):
        read_space({"optimizer_kwargs.betas": {"type": "categorical", "choices": [(0.8, 0.9)]}})


def test_yaml_space_reads_log_step_and_categorical(tmp_path: Path) -> None:
    path = tmp_path / "space.yaml"
    path.write_text(
        "search:\n"
        "  epochs: 2\n"
        "  learning_rate: {type: float, low: 1e-4, high: 1e-2, log: true}\n"  # 1e-4: a string
        "  train_batch_size: [16, 32]\n"
        "  module.hidden: {type: int, low: 16, high: 48, step: 16}\n"
        "  scheduler: {type: categorical, choices: [null, LinearWithWarmup]}\n",
        encoding="utf-8",
    )
    distributions, config = sampled(read_space(path))
    assert distributions["learning_rate"] == FloatDistribution(1e-4, 1e-2, log=True)
    assert distributions["module.hidden"] == IntDistribution(16, 48, step=16)
    assert distributions["scheduler"] == CategoricalDistribution([None, "LinearWithWarmup"])
    assert distributions["train_batch_size"] == CategoricalDistribution([16, 32])
    assert config.hps.epochs == 2


@pytest.mark.parametrize(
    ("text", "key", "problem"),
    [
        ("search:\n  learning_rate: {type: float, low: 1e-2, high: 1e-4}\n", "learning_rate",
         "low must be below high"),
        ("search:\n  lerning_rate: 1e-3\n", "lerning_rate", "did you mean 'learning_rate'"),
        ("search:\n  module.hidden: {type: int, low: 16, hi: 48}\n", "module.hidden",
         "did you mean 'high'"),
        ("search:\n  module.hidden: {type: int, low: 16.5, high: 48}\n", "module.hidden",
         "whole low"),
        ("search:\n  x: {type: float, low: 0, high: 1, log: true}\n", "x", "not a parameter"),
        ("search:\n  batch_size: 8\n  train_batch_size: [8, 16]\n", "batch_size",
         "give one of them"),
        ("hps:\n  epochs: 2\n", "", "'search:'"),
    ],
)  # fmt: skip
def test_yaml_errors_name_the_key_and_the_file(
    tmp_path: Path, text: str, key: str, problem: str
) -> None:
    path = tmp_path / "space.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SearchSpaceError) as caught:
        read_space(path)
    assert caught.value.key == key
    assert problem in caught.value.problem
    assert str(path) in str(caught.value)
    assert caught.value.file == str(path)


def test_module_arguments_are_checked_against_get_module_fn() -> None:
    def build(hidden: int = 8) -> None: ...

    check_module_arguments(build, ["module.hidden", "epochs"])
    with pytest.raises(SearchSpaceError, match="takes no argument 'width'") as caught:
        check_module_arguments(build, ["module.width"])
    assert caught.value.key == "module.width"


def test_a_space_function_is_read_like_the_others_and_may_be_conditional() -> None:
    def space(trial: optuna.trial.BaseTrial) -> dict[str, Any]:
        optimizer = trial.suggest_categorical("optimizer", ["SGD", "AdamW"])
        chosen: dict[str, Any] = {"optimizer": optimizer, "epochs": 2}
        if optimizer == "SGD":
            chosen["optimizer_kwargs.momentum"] = trial.suggest_float("momentum", 0.0, 0.9)
        return chosen

    distributions, sgd = sampled(FunctionSpace(space), {"optimizer": "SGD"})
    assert set(distributions) == {"optimizer", "momentum", "learning_rate"}
    assert "momentum" in sgd.hps.optimizer_kwargs
    assert sgd.hps.epochs == 2
    distributions, adamw = sampled(FunctionSpace(space), {"optimizer": "AdamW"})
    assert "momentum" not in distributions
    assert set(adamw.hps.optimizer_kwargs) == {"lr", "betas", "eps", "weight_decay"}
    with pytest.raises(SearchSpaceError, match="lerning_rate"):
        sampled(FunctionSpace(lambda trial: {"lerning_rate": 1e-3}))


def test_every_choice_is_resolved_before_any_trial(
    data: tuple[TensorDataset, TensorDataset], tmp_path: Path
) -> None:
    search = HyperParameterSearch(DigitsMLP, *data, output_dir=tmp_path, log_with=None)
    with pytest.raises(SearchSpaceError) as caught:
        search.set_parameters(scheduler={"ok": "LinearWithWarmup", "bad": "StepLR"})
    # StepLR needs a step_size that no parameter gives.
    assert caught.value.key == "scheduler"
    assert "step_size" in caught.value.problem
    assert search.space is None
    with pytest.raises(SearchSpaceError, match="no parameter is searched"):
        search.set_parameters(learning_rate=1e-3)
    with pytest.raises(SearchSpaceError, match="takes no argument 'width'"):
        search.set_space({"module.width": {"type": "int", "low": 8, "high": 16}})


def test_resolved_hyperparameters_round_trip_through_1x_yaml(tmp_path: Path) -> None:
    _, config = sampled(from_parameters(ONE_X_SNIPPET))
    config.hps.to_yaml(tmp_path / "best.yaml")
    assert HyperParameters.from_yaml(tmp_path / "best.yaml") == config.hps
    assert (tmp_path / "best.yaml").read_text().startswith("hps:\n")
