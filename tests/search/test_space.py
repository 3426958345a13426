"""The search space: a dict or YAML file, and space(trial), read the same way, checked before
any trial, and turned into the HyperParameters each trial trains with."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import optuna
import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
from torch.utils.data import TensorDataset

from accmt_search import HyperParameterSearch, SearchConfigError, SearchSpaceError
from accmt_search._resolve import check_module_arguments, resolve
from accmt_search._space import FunctionSpace, Space, read_space
from accmt_trainer import HyperParameters

from ._data import DigitsMLP


def sampled(space: Space, params: dict[str, Any] | None = None) -> tuple[Any, Any]:
    """One trial of ``space`` on an in-memory study: (its distributions, its config)."""
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    if params is not None:
        study.enqueue_trial(params)
    trial = study.ask()
    config = resolve(space.sample(trial))
    return study.trials[-1].distributions, config


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
            "optimizer": "AdamW",
            "optimizer_kwargs.betas": {
                "type": "categorical",
                "choices": {"fast": (0.8, 0.9), "slow": (0.9, 0.999)},
            },
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
        "  optimizer_kwargs.lr: {type: float, low: 1e-4, high: 1e-2, log: true}\n"  # 1e-4: a string
        "  batch_size: {type: categorical, choices: [16, 32]}\n"
        "  module.hidden: {type: int, low: 16, high: 48, step: 16}\n"
        "  scheduler: {type: categorical, choices: [null, ConstantLR]}\n",
        encoding="utf-8",
    )
    distributions, config = sampled(read_space(path))
    assert distributions["optimizer_kwargs.lr"] == FloatDistribution(1e-4, 1e-2, log=True)
    assert distributions["module.hidden"] == IntDistribution(16, 48, step=16)
    assert distributions["scheduler"] == CategoricalDistribution([None, "ConstantLR"])
    assert distributions["batch_size"] == CategoricalDistribution([16, 32])
    assert config.hps.epochs == 2


@pytest.mark.parametrize(
    ("text", "key", "problem"),
    [
        (
            "search:\n  optimizer_kwargs.lr: {type: float, low: 1e-2, high: 1e-4}\n",
            "optimizer_kwargs.lr",
            "low must be below high",
        ),
        ("search:\n  optimzer: SGD\n", "optimzer", "did you mean 'optimizer'"),
        (
            "search:\n  module.hidden: {type: int, low: 16, hi: 48}\n",
            "module.hidden",
            "did you mean 'high'",
        ),
        (
            "search:\n  module.hidden: {type: int, low: 16.5, high: 48}\n",
            "module.hidden",
            "whole low",
        ),
        ("search:\n  x: {type: float, low: 0, high: 1, log: true}\n", "x", "not a parameter"),
        (
            "search:\n  optimizer_kwargs: {lr: 0.1}\n  optimizer_kwargs.lr: 0.2\n",
            "optimizer_kwargs.lr",
            "give one of them",
        ),
        ("hps:\n  epochs: 2\n", "", "'search:'"),
    ],
)
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


def test_a_former_name_says_what_to_write() -> None:
    with pytest.raises(SearchSpaceError) as caught:
        read_space({"learning_rate": {"type": "float", "low": 1e-4, "high": 1e-2}})
    assert caught.value.key == "learning_rate"
    assert "write optimizer_kwargs.lr" in caught.value.problem
    assert "from accmt import HyperParameterSearch" in caught.value.problem


def test_module_arguments_are_checked_against_get_module_fn() -> None:
    def build(hidden: int = 8) -> None: ...

    check_module_arguments(build, ["module.hidden", "epochs"])
    with pytest.raises(SearchSpaceError, match="takes no argument 'width'") as caught:
        check_module_arguments(build, ["module.width"])
    assert caught.value.key == "module.width"


def test_a_space_function_is_read_like_the_others_and_may_be_conditional() -> None:
    def space(trial: optuna.trial.BaseTrial) -> dict[str, Any]:
        optimizer = trial.suggest_categorical("optimizer", ["SGD", "AdamW"])
        learning_rate = trial.suggest_float("optimizer_kwargs.lr", 1e-7, 1e-3, log=True)
        chosen: dict[str, Any] = {
            "optimizer": optimizer,
            "epochs": 2,
            "optimizer_kwargs.lr": learning_rate,
        }
        if optimizer == "SGD":
            chosen["optimizer_kwargs.momentum"] = trial.suggest_float("momentum", 0.0, 0.9)
        return chosen

    distributions, sgd = sampled(FunctionSpace(space), {"optimizer": "SGD"})
    assert set(distributions) == {"optimizer", "momentum", "optimizer_kwargs.lr"}
    assert "momentum" in sgd.hps.optimizer_kwargs
    assert sgd.hps.epochs == 2
    distributions, adamw = sampled(FunctionSpace(space), {"optimizer": "AdamW"})
    assert "momentum" not in distributions
    # What the function does not name is HyperParameters' default (AdamW's own betas, eps...).
    assert set(adamw.hps.optimizer_kwargs) == {"lr"}
    with pytest.raises(SearchSpaceError, match="optimzer"):
        sampled(FunctionSpace(lambda trial: {"optimzer": "SGD"}))


def test_every_choice_is_resolved_before_any_trial(
    data: tuple[TensorDataset, TensorDataset], tmp_path: Path
) -> None:
    search = HyperParameterSearch(DigitsMLP, *data, output_dir=tmp_path, log_with=None)
    schedulers = {"ok": "ConstantLR", "bad": "StepLR"}
    with pytest.raises(SearchSpaceError) as caught:
        search.set_space({"scheduler": {"type": "categorical", "choices": schedulers}})
    # StepLR needs a step_size that no parameter gives.
    assert caught.value.key == "scheduler"
    assert "step_size" in caught.value.problem
    assert search.space is None
    with pytest.raises(SearchSpaceError, match="no parameter is searched"):
        search.set_space({"optimizer_kwargs.lr": 1e-3})
    with pytest.raises(SearchSpaceError, match="takes no argument 'width'"):
        search.set_space({"module.width": {"type": "int", "low": 8, "high": 16}})


def test_the_resolved_hyperparameters_round_trip_through_yaml(tmp_path: Path) -> None:
    _, config = sampled(
        read_space(
            {"epochs": 3, "optimizer_kwargs.lr": {"type": "float", "low": 1e-4, "high": 1e-2}}
        )
    )
    config.hps.to_yaml(tmp_path / "best.yaml")
    assert HyperParameters.from_yaml(tmp_path / "best.yaml") == config.hps
    assert (tmp_path / "best.yaml").read_text().startswith("hps:\n")


def test_a_list_of_validation_datasets_is_refused_with_what_to_write(
    data: tuple[TensorDataset, TensorDataset],
) -> None:
    train, valid = data
    with pytest.raises(SearchConfigError, match="pass a dict of named datasets") as caught:
        HyperParameterSearch(DigitsMLP, train, [valid, valid])  # type: ignore[arg-type]
    assert "from accmt import HyperParameterSearch" in str(caught.value)
