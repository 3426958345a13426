"""HyperParameters: built from Python, a dict (flat or accmt 1.x's layout) and YAML; to_dict
round trips; a configuration names optimizers and schedulers by registered name only (a dotted
path is refused, never imported); every bad key or value is an error that names it."""

from __future__ import annotations

import json
import pickle
import sys
from pathlib import Path
from typing import Any

import attrs
import pytest
import torch
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from accmt_trainer import (
    HyperParameters,
    HyperParametersError,
    register_optimizer,
    register_scheduler,
)

FIXTURES = Path(__file__).parent / "fixtures"


class MyOptimizer(torch.optim.SGD):
    """An optimizer from outside torch.optim, registered below under a test name."""


class MyScheduler(torch.optim.lr_scheduler.LambdaLR):
    """A scheduler from outside torch.optim.lr_scheduler that the run sizes; registered below."""

    def __init__(self, optimizer: torch.optim.Optimizer, total_iters: int, floor: float = 0.0):
        self.total_iters = total_iters
        super().__init__(optimizer, lambda step: max(floor, 1 - step / total_iters))


class UnregisteredOptimizer(torch.optim.SGD):
    """An optimizer that Python code passes directly, never registered."""


class UnregisteredScheduler(torch.optim.lr_scheduler.ExponentialLR):
    """A scheduler that Python code passes directly, never registered."""


# Registered once, at import, under names no other test module uses.
register_optimizer("HpsTestOptimizer", MyOptimizer)
register_scheduler("HpsTestScheduler", MyScheduler)


def parameters() -> list[torch.nn.Parameter]:
    return [torch.nn.Parameter(torch.zeros(3))]


# --- construction -----------------------------------------------------------------------------


def test_defaults_follow_accmt_1x() -> None:
    hps = HyperParameters()
    assert (hps.epochs, hps.max_steps, hps.batch_size) == (1, None, 1)
    assert (hps.optimizer, hps.optimizer_kwargs) == ("SGD", {})
    assert (hps.scheduler, hps.scheduler_kwargs) == (None, {})
    assert hps.step_scheduler_per_epoch is False


def test_positional_arguments_keep_1x_order() -> None:
    hps = HyperParameters(3, 100, 8, "AdamW", {"lr": 0.1}, "StepLR", {"step_size": 2}, True)
    assert hps == HyperParameters(
        epochs=3,
        max_steps=100,
        batch_size=8,
        optimizer="AdamW",
        optimizer_kwargs={"lr": 0.1},
        scheduler="StepLR",
        scheduler_kwargs={"step_size": 2},
        step_scheduler_per_epoch=True,
    )


@pytest.mark.parametrize(
    ("given", "kept"),
    [
        ("adamw", "AdamW"),
        ("ADAM", "Adam"),
        ("sgd", "SGD"),
        ("nadam", "NAdam"),
        (torch.optim.RMSprop, "RMSprop"),
        ("hpstestoptimizer", "HpsTestOptimizer"),
        ("HPSTESTOPTIMIZER", "HpsTestOptimizer"),
        (MyOptimizer, "HpsTestOptimizer"),
        (UnregisteredOptimizer, UnregisteredOptimizer),
    ],
)
def test_optimizer_by_registered_name_any_case_or_class(given: Any, kept: Any) -> None:
    assert HyperParameters(optimizer=given).optimizer == kept


@pytest.mark.parametrize(
    ("key", "given"),
    [
        ("optimizer", "torch.optim.NAdam"),
        ("optimizer", f"{__name__}.MyOptimizer"),
        ("optimizer", "no_such_module.Thing"),
        ("scheduler", "torch.optim.lr_scheduler.StepLR"),
        ("scheduler", f"{__name__}.MyScheduler"),
        ("scheduler", "no_such_module.Thing"),
    ],
)
def test_a_dotted_path_is_refused_and_never_imported(key: str, given: str) -> None:
    with pytest.raises(HyperParametersError) as caught:
        HyperParameters(**{key: given})
    assert caught.value.key == key
    message = str(caught.value)
    for word in [repr(given), "dotted path", "never import", f"register_{key}(name, cls)"]:
        assert word in message
    assert "no_such_module" not in sys.modules


@pytest.mark.parametrize(
    ("given", "kept"),
    [
        ("linearwithwarmup", "LinearWithWarmup"),
        ("INVERSESQRT", "InverseSQRT"),
        ("constant", "Constant"),
        ("steplr", "StepLR"),
        (torch.optim.lr_scheduler.ExponentialLR, "ExponentialLR"),
        ("hpstestscheduler", "HpsTestScheduler"),
        (MyScheduler, "HpsTestScheduler"),
        (UnregisteredScheduler, UnregisteredScheduler),
    ],
)
def test_scheduler_by_registered_name_any_case_or_class(given: Any, kept: Any) -> None:
    needed: dict[Any, dict[str, Any]] = {
        "LinearWithWarmup": {"num_warmup_steps": 1},
        "InverseSQRT": {"num_warmup_steps": 1},
        "StepLR": {"step_size": 1},
        "ExponentialLR": {"gamma": 0.5},
        UnregisteredScheduler: {"gamma": 0.5},
    }
    kwargs = needed.get(kept, {})
    assert HyperParameters(scheduler=given, scheduler_kwargs=kwargs).scheduler == kept


def test_batch_size_int_or_train_val_pair() -> None:
    assert (
        HyperParameters(batch_size=8).train_batch_size,
        HyperParameters(batch_size=8).val_batch_size,
    ) == (8, 8)
    pair = HyperParameters(batch_size=[8, 32])
    assert pair.batch_size == (8, 32)
    assert (pair.train_batch_size, pair.val_batch_size) == (8, 32)


def test_kwargs_numeric_strings_become_numbers_and_lists_tuples() -> None:
    hps = HyperParameters(
        optimizer="AdamW",
        optimizer_kwargs={"lr": "1e-6", "betas": ["0.9", 0.98], "eps": "-1.5E+3", "amsgrad": True},
        scheduler="CyclicLR",
        scheduler_kwargs={"base_lr": ".1", "max_lr": "1", "mode": "exp_range"},
    )
    assert hps.optimizer_kwargs == {
        "lr": 1e-6,
        "betas": (0.9, 0.98),
        "eps": -1500.0,
        "amsgrad": True,
    }
    assert type(hps.scheduler_kwargs["max_lr"]) is int
    assert hps.scheduler_kwargs == {"base_lr": 0.1, "max_lr": 1, "mode": "exp_range"}


def test_kwargs_are_copied() -> None:
    kwargs = {"lr": 0.1}
    hps = HyperParameters(optimizer_kwargs=kwargs)
    kwargs["lr"] = 0.2
    assert hps.optimizer_kwargs == {"lr": 0.1}


@pytest.mark.parametrize(
    ("given", "kept"),
    [
        ({"num_warmup_steps": 0.1}, {"warmup_ratio": 0.1}),  # accmt 1.x: a float in [0, 1]
        ({"num_warmup_steps": 1.0}, {"warmup_ratio": 1.0}),
        ({"num_warmup_steps": "1e3"}, {"num_warmup_steps": 1000}),
        ({"num_warmup_steps": 1}, {"num_warmup_steps": 1}),
        ({"warmup_ratio": 0}, {"warmup_ratio": 0.0}),
    ],
)
def test_warmup_forms(given: dict[str, Any], kept: dict[str, Any]) -> None:
    hps = HyperParameters(scheduler="LinearWithWarmup", scheduler_kwargs=given)
    assert hps.scheduler_kwargs == kept
    assert {type(value) for value in hps.scheduler_kwargs.values()} == {
        type(value) for value in kept.values()
    }


def test_is_frozen() -> None:
    hps = HyperParameters()
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        hps.epochs = 3  # type: ignore[misc]
    assert attrs.evolve(hps, epochs=3).epochs == 3


# --- from dicts and YAML ----------------------------------------------------------------------

FIXTURE_HPS = HyperParameters(
    epochs=3,
    batch_size=(32, 64),
    optimizer="AdamW",
    optimizer_kwargs={"lr": 1e-6, "weight_decay": 0.01, "betas": (0.9, 0.98)},
    scheduler="LinearWithWarmup",
    scheduler_kwargs={"num_warmup_steps": 29770},
)


def test_from_flat_dict() -> None:
    data = {
        "epochs": 3,
        "batch_size": [32, 64],
        "optimizer": "AdamW",
        "optimizer_kwargs": {"lr": "1e-6", "weight_decay": 0.01, "betas": [0.9, 0.98]},
        "scheduler": "LinearWithWarmup",
        "scheduler_kwargs": {"num_warmup_steps": 29770},
    }
    assert HyperParameters.from_dict(data) == FIXTURE_HPS


@pytest.mark.parametrize("block", ["optim", "optimizer"])
def test_from_1x_layout(block: str) -> None:
    data = {
        "hps": {
            "epochs": 3,
            "batch_size": [32, 64],
            block: {"type": "AdamW", "lr": "1e-6", "weight_decay": 0.01, "betas": [0.9, 0.98]},
            "scheduler": {"type": "LinearWithWarmup", "num_warmup_steps": 29770},
        }
    }
    assert HyperParameters.from_dict(data) == FIXTURE_HPS


def test_1x_layout_without_hps_wrapper_and_1x_kwarg_name() -> None:
    inner = {"optimizer": {"type": "SGD", "lr": 0.5}, "scheduler": None}
    assert HyperParameters.from_dict(inner) == HyperParameters(optimizer_kwargs={"lr": 0.5})
    flat = {"optimizer": "SGD", "optim_kwargs": {"lr": 0.5}}
    assert HyperParameters.from_dict(flat) == HyperParameters(optimizer_kwargs={"lr": 0.5})
    assert HyperParameters.from_dict({"hps": None}) == HyperParameters()


def test_from_yaml_fixture_in_1x_layout() -> None:
    assert HyperParameters.from_yaml(FIXTURES / "hps_1x.yaml") == FIXTURE_HPS


def test_from_yaml_newest_1x_layout() -> None:
    hps = HyperParameters.from_yaml(FIXTURES / "hps_1x_newest.yaml")
    assert hps == HyperParameters(
        epochs=2,
        max_steps=1000,
        batch_size=16,
        optimizer="SGD",
        optimizer_kwargs={"lr": 1e-3, "momentum": 0.9},
        scheduler="CosineWithWarmup",
        scheduler_kwargs={"warmup_ratio": 0.1},
    )


@pytest.mark.parametrize("as_", [str, Path, lambda path: yaml.safe_load(path.read_text())])
def test_from_config_reads_paths_and_dicts(as_: Any) -> None:
    assert HyperParameters.from_config(as_(FIXTURES / "hps_1x.yaml")) == FIXTURE_HPS


def test_from_config_passes_hyperparameters_through() -> None:
    assert HyperParameters.from_config(FIXTURE_HPS) is FIXTURE_HPS


# --- to_dict round trip -----------------------------------------------------------------------

FLOATS = st.floats(allow_nan=False, allow_infinity=False, width=64)


def _kwargs(required: dict[str, Any], optional: dict[str, Any]) -> st.SearchStrategy[Any]:
    return st.fixed_dictionaries(required, optional=optional)


OPTIMIZERS = st.one_of(
    st.tuples(
        st.sampled_from(
            ["SGD", "sgd", torch.optim.SGD, MyOptimizer, "HpsTestOptimizer", "hpstestoptimizer"]
        ),
        _kwargs({}, {"lr": FLOATS, "momentum": FLOATS, "nesterov": st.booleans()}),
    ),
    st.tuples(
        st.sampled_from(["AdamW", "Adam", torch.optim.AdamW]),
        _kwargs({}, {"lr": FLOATS, "betas": st.tuples(FLOATS, FLOATS), "eps": FLOATS}),
    ),
)
WARMUP = st.one_of(
    st.fixed_dictionaries({"num_warmup_steps": st.integers(0, 10**9)}),
    st.fixed_dictionaries({"warmup_ratio": st.floats(0, 1)}),
)
SCHEDULERS = st.one_of(
    st.just((None, {})),
    st.tuples(st.sampled_from(["LinearWithWarmup", "ConstantWithWarmup"]), WARMUP),
    st.tuples(
        st.just("CosineWithWarmup"),
        st.builds(
            lambda warmup, extra: {**warmup, **extra}, WARMUP, _kwargs({}, {"num_cycles": FLOATS})
        ),
    ),
    st.tuples(
        st.sampled_from(["StepLR", torch.optim.lr_scheduler.StepLR]),
        _kwargs({"step_size": st.integers(1, 100)}, {"gamma": FLOATS}),
    ),
    st.tuples(st.just("OneCycleLR"), _kwargs({"max_lr": FLOATS}, {"pct_start": FLOATS})),
    st.tuples(
        st.sampled_from([MyScheduler, "HpsTestScheduler", "HPSTESTSCHEDULER"]),
        _kwargs({}, {"floor": FLOATS}),
    ),
    st.tuples(st.just("MultiStepLR"), _kwargs({"milestones": st.lists(st.integers(1, 50))}, {})),
)


@st.composite
def hyperparameters(draw: st.DrawFn) -> HyperParameters:
    optimizer, optimizer_kwargs = draw(OPTIMIZERS)
    scheduler, scheduler_kwargs = draw(SCHEDULERS)
    batch_size = draw(
        st.one_of(st.integers(1, 4096), st.tuples(st.integers(1, 9), st.integers(1, 9)))
    )
    return HyperParameters(
        epochs=draw(st.integers(1, 10**6)),
        max_steps=draw(st.none() | st.integers(1, 10**9)),
        batch_size=batch_size,
        optimizer=optimizer,
        optimizer_kwargs=optimizer_kwargs,
        scheduler=scheduler,
        scheduler_kwargs=scheduler_kwargs,
        step_scheduler_per_epoch=draw(st.booleans()),
    )


def _is_plain(value: Any) -> bool:
    if isinstance(value, dict):
        return all(isinstance(key, str) and _is_plain(item) for key, item in value.items())
    if isinstance(value, list):
        return all(_is_plain(item) for item in value)
    return value is None or isinstance(value, (bool, int, float, str))


@settings(max_examples=100, deadline=None)
@given(hyperparameters())
def test_to_dict_is_plain_data_that_round_trips(hps: HyperParameters) -> None:
    data = hps.to_dict()
    assert _is_plain(data)
    assert HyperParameters.from_dict(data) == hps
    assert HyperParameters.from_dict(json.loads(json.dumps(data))) == hps
    assert HyperParameters.from_dict(yaml.safe_load(yaml.safe_dump(data))) == hps


@settings(max_examples=30, deadline=None)
@given(hyperparameters())
def test_to_yaml_writes_the_1x_layout_and_round_trips(
    tmp_path_factory: pytest.TempPathFactory, hps: HyperParameters
) -> None:
    path = tmp_path_factory.getbasetemp() / "hps.yaml"
    hps.to_yaml(path)
    written = yaml.safe_load(path.read_text())
    assert set(written) == {"hps"}
    assert written["hps"]["optimizer"]["type"] == hps.to_dict()["optimizer"]
    assert HyperParameters.from_yaml(path) == hps


def test_to_dict_writes_registered_names() -> None:
    hps = HyperParameters(
        optimizer=MyOptimizer,
        scheduler=MyScheduler,
        batch_size=(2, 3),
        optimizer_kwargs={"lr": 0.5},
        scheduler_kwargs={"floor": 0.1},
    )
    assert hps.to_dict() == {
        "epochs": 1,
        "max_steps": None,
        "batch_size": [2, 3],
        "optimizer": "HpsTestOptimizer",
        "optimizer_kwargs": {"lr": 0.5},
        "scheduler": "HpsTestScheduler",
        "scheduler_kwargs": {"floor": 0.1},
        "step_scheduler_per_epoch": False,
    }
    assert HyperParameters(optimizer=torch.optim.AdamW).to_dict()["optimizer"] == "AdamW"


def test_an_unregistered_class_trains_but_from_dict_refuses_its_written_name(
    tmp_path: Path,
) -> None:
    class Local(torch.optim.SGD):
        pass

    hps = HyperParameters(
        optimizer=Local,
        optimizer_kwargs={"lr": 0.5},
        scheduler=UnregisteredScheduler,
        scheduler_kwargs={"gamma": 0.5},
    )
    assert (hps.optimizer, hps.scheduler) == (Local, UnregisteredScheduler)
    weight = torch.nn.Parameter(torch.zeros(3))
    optimizer = hps.build_optimizer([weight])
    scheduler = hps.build_scheduler(optimizer, num_training_steps=4, num_epochs=1)
    assert type(optimizer) is Local
    assert type(scheduler) is UnregisteredScheduler
    weight.grad = torch.ones(3)
    optimizer.step()
    assert scheduler is not None
    scheduler.step()
    assert torch.equal(weight.detach(), torch.full((3,), -0.5))
    assert optimizer.param_groups[0]["lr"] == 0.25

    data = hps.to_dict()
    local_name = f"{__name__}.{Local.__qualname__}"
    assert data["optimizer"] == local_name
    assert data["scheduler"] == f"{__name__}.UnregisteredScheduler"
    with pytest.raises(HyperParametersError) as caught:
        HyperParameters.from_dict(data)
    assert caught.value.key == "optimizer"
    for word in [repr(local_name), "never import", "register_optimizer(name, cls)"]:
        assert word in str(caught.value)

    path = tmp_path / "hps.yaml"
    hps.to_yaml(path)
    with pytest.raises(HyperParametersError) as caught:
        HyperParameters.from_yaml(path)
    assert caught.value.key == "hps.optimizer.type"
    assert str(path) in str(caught.value)


def test_hyperparameters_pickle() -> None:
    assert pickle.loads(pickle.dumps(FIXTURE_HPS)) == FIXTURE_HPS


# --- errors name the key and the value --------------------------------------------------------

ERRORS = [
    # (config, the key the error names, words the message must hold)
    ({"epoch": 3}, "epoch", ["'epoch'", "did you mean 'epochs'"]),
    ({"hps": {"epoch": 3}}, "hps.epoch", ["'epoch'", "'epochs'"]),
    ({"epoch": 3, "lr": 1}, "hyperparameters", ["'epoch'", "'lr'"]),
    ({"hps": {}, "epochs": 3}, "epochs", ["next to 'hps'"]),
    ({"hps": {"epochs": True}}, "hps.epochs", ["expected an int", "True"]),
    ({"epochs": 0}, "epochs", ["at least 1", "0"]),
    ({"epochs": -2}, "epochs", ["-2"]),
    ({"epochs": 2.0}, "epochs", ["expected an int", "2.0"]),
    ({"max_steps": 0}, "max_steps", ["at least 1"]),
    ({"batch_size": "32"}, "batch_size", ["'32'"]),
    ({"batch_size": [8, 0]}, "batch_size[1]", ["at least 1", "0"]),
    ({"hps": {"batch_size": [8, 8, 8]}}, "hps.batch_size", ["(train, val) pair", "[8, 8, 8]"]),
    ({"step_scheduler_per_epoch": "yes"}, "step_scheduler_per_epoch", ["'yes'"]),
    (
        {"hps": {"optim": {"type": "AdamX"}}},
        "hps.optim.type",
        ["'AdamX' is not a registered optimizer", "did you mean", "'Adamax'"],
    ),
    ({"optimizer": "Adamw_"}, "optimizer", ["did you mean 'AdamW'"]),
    ({"optimizer": 3}, "optimizer", ["got 3"]),
    ({"optimizer": "nonsense"}, "optimizer", ["'nonsense' is not a registered optimizer"]),
    (
        {"optimizer": "collections.OrderedDict"},
        "optimizer",
        ["'collections.OrderedDict'", "dotted path", "never import", "register_optimizer("],
    ),
    (
        {"optimizer": "no_such_module.Thing"},
        "optimizer",
        ["'no_such_module.Thing'", "dotted path", "never import"],
    ),
    (
        {"hps": {"scheduler": {"type": "torch.optim.lr_scheduler.StepLR", "step_size": 1}}},
        "hps.scheduler.type",
        ["dotted path", "never import", "register_scheduler("],
    ),
    ({"hps": {"optimizer": {"lr": 0.1}}}, "hps.optimizer.type", ["missing"]),
    (
        {"hps": {"optimizer": {"type": "AdamW", "lrr": 0.1}}},
        "hps.optimizer.lrr",
        ["torch.optim.AdamW", "'lrr'", "did you mean 'lr'"],
    ),
    (
        {"optimizer": "SGD", "optimizer_kwargs": {"lrr": 1, "moment": 0.9}},
        "optimizer_kwargs",
        ["'lrr'", "'moment'", "did you mean 'momentum'"],
    ),
    ({"optimizer_kwargs": [1, 2]}, "optimizer_kwargs", ["mapping"]),
    ({"optimizer": "SGD", "optim": {"type": "Adam"}}, "optim.type", ["given twice"]),
    (
        {"optimizer": {"type": "SGD", "lr": 1}, "optimizer_kwargs": {"lr": 2}},
        "optimizer_kwargs",
        ["given twice"],
    ),
    (
        {"hps": {"scheduler": {"type": "LinearWarmup", "num_warmup_steps": 1}}},
        "hps.scheduler.type",
        ["'LinearWarmup'", "did you mean 'LinearWithWarmup'"],
    ),
    (
        {"hps": {"scheduler": {"type": "StepLR", "step_size": 2, "warmup_ratio": 0.1}}},
        "hps.scheduler.warmup_ratio",
        ["torch.optim.lr_scheduler.StepLR", "'warmup_ratio'"],
    ),
    ({"scheduler": "StepLR"}, "scheduler_kwargs", ["StepLR", "needs 'step_size'"]),
    (
        {"scheduler": "CosineAnnealingWarmRestarts"},
        "scheduler_kwargs",
        ["needs 'T_0'"],
    ),
    (
        {"hps": {"scheduler": {"type": "LinearWithWarmup"}}},
        "hps.scheduler",
        ["LinearWithWarmup", "'num_warmup_steps' (or 'warmup_ratio')"],
    ),
    (
        {"scheduler": "CosineWithWarmup", "scheduler_kwargs": {"warmup_ratio": 1.5}},
        "scheduler_kwargs.warmup_ratio",
        ["[0, 1]", "1.5"],
    ),
    (
        {"scheduler": "CosineWithWarmup", "scheduler_kwargs": {"warmup_ratio": True}},
        "scheduler_kwargs.warmup_ratio",
        ["True"],
    ),
    (
        {"scheduler": "LinearWithWarmup", "scheduler_kwargs": {"num_warmup_steps": -1}},
        "scheduler_kwargs.num_warmup_steps",
        ["at least 0", "-1"],
    ),
    (
        {"hps": {"scheduler": {"type": "LinearWithWarmup", "num_warmup_steps": 2.5}}},
        "hps.scheduler.num_warmup_steps",
        ["expected an int", "2.5"],
    ),
    (
        {
            "scheduler": "LinearWithWarmup",
            "scheduler_kwargs": {"num_warmup_steps": 5, "warmup_ratio": 0.1},
        },
        "scheduler_kwargs",
        ["not both"],
    ),
    (
        {
            "scheduler": "LinearWithWarmup",
            "scheduler_kwargs": {"num_warmup_steps": 1, "num_training_steps": 0},
        },
        "scheduler_kwargs.num_training_steps",
        ["at least 1"],
    ),
    ({"scheduler_kwargs": {"gamma": 0.5}}, "scheduler_kwargs", ["'gamma'", "no scheduler"]),
    (
        {"scheduler": "ChainedScheduler"},
        "scheduler",
        ["'ChainedScheduler' is not a registered scheduler"],
    ),
    ({"scheduler": torch.optim.SGD}, "scheduler", ["LRScheduler", "SGD"]),
    ({"scheduler": 3}, "scheduler", ["registered name", "LRScheduler", "got 3"]),
    ({"hps": [1, 2]}, "hps", ["mapping", "list"]),
]


@pytest.mark.parametrize(("config", "key", "words"), ERRORS)
def test_errors_name_the_key_and_the_value(
    config: dict[str, Any], key: str, words: list[str]
) -> None:
    with pytest.raises(HyperParametersError) as caught:
        HyperParameters.from_dict(config)
    assert caught.value.key == key
    message = str(caught.value)
    assert message.startswith(f"{key}: ")
    for word in words:
        assert word in message


def test_errors_from_python_name_the_field() -> None:
    with pytest.raises(HyperParametersError) as caught:
        HyperParameters(optimizer="AdamW", optimizer_kwargs={"lrr": 0.1})
    assert caught.value.key == "optimizer_kwargs.lrr"
    with pytest.raises(HyperParametersError) as caught:
        HyperParameters(epochs=False)
    assert caught.value.key == "epochs"


def test_error_is_a_value_error_that_pickles() -> None:
    error = HyperParametersError("hps.epochs", "must be at least 1, got 0")
    assert isinstance(error, ValueError)
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.key, copy.problem, str(copy)) == (error.key, error.problem, str(error))


def test_yaml_errors_name_the_key_and_the_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("hps:\n  epochs: 2\n  optim:\n    type: AdamW\n    lr: 1e-3\n    wd: 0.1\n")
    with pytest.raises(HyperParametersError) as caught:
        HyperParameters.from_yaml(path)
    assert caught.value.key == "hps.optim.wd"
    assert str(path) in str(caught.value)


def test_from_config_rejects_other_types() -> None:
    with pytest.raises(HyperParametersError, match="got int") as caught:
        HyperParameters.from_config(3)  # type: ignore[arg-type]
    assert caught.value.key == "config"


def test_to_yaml_names_a_value_yaml_cannot_hold(tmp_path: Path) -> None:
    hps = HyperParameters(scheduler="LambdaLR", scheduler_kwargs={"lr_lambda": abs})
    assert hps.to_dict()["scheduler_kwargs"] == {"lr_lambda": abs}
    with pytest.raises(HyperParametersError, match="abs") as caught:
        hps.to_yaml(tmp_path / "x.yaml")
    assert caught.value.key == "to_yaml"


# --- the optimizer ----------------------------------------------------------------------------


def test_build_optimizer_uses_the_class_and_kwargs() -> None:
    hps = HyperParameters.from_yaml(FIXTURES / "hps_1x.yaml")
    optimizer = hps.build_optimizer(parameters())
    assert type(optimizer) is torch.optim.AdamW
    group = optimizer.param_groups[0]
    assert (group["lr"], group["weight_decay"], group["betas"]) == (1e-6, 0.01, (0.9, 0.98))


def test_build_optimizer_with_a_custom_class_and_param_groups() -> None:
    for optimizer_, built in [("hpstestoptimizer", MyOptimizer), (UnregisteredOptimizer,) * 2]:
        hps = HyperParameters(optimizer=optimizer_, optimizer_kwargs={"lr": 0.25})
        groups = [{"params": parameters(), "lr": 0.5}, {"params": parameters()}]
        optimizer = hps.build_optimizer(groups)
        assert type(optimizer) is built
        assert [group["lr"] for group in optimizer.param_groups] == [0.5, 0.25]


def test_build_optimizer_names_a_value_torch_rejects() -> None:
    hps = HyperParameters(optimizer="SGD", optimizer_kwargs={"lr": -1.0})
    with pytest.raises(HyperParametersError, match=r"torch\.optim\.SGD") as caught:
        hps.build_optimizer(parameters())
    assert caught.value.key == "optimizer_kwargs"
    assert "-1.0" in str(caught.value)


def test_the_constructor_takes_the_field_names_only() -> None:
    # optim, optim_kwargs and {"type": ...} mappings are read from files (from_dict) and by
    # accmt's HyperParameters; the constructor is attrs' own.
    with pytest.raises(TypeError, match="unexpected keyword argument 'optim'"):
        HyperParameters(optim="AdamW")  # type: ignore[call-arg]
    with pytest.raises(HyperParametersError, match="expected a registered name"):
        HyperParameters(optimizer={"type": "AdamW"})  # type: ignore[arg-type]
    assert HyperParameters.from_dict({"optim": {"type": "AdamW"}}).optimizer == "AdamW"
