"""A configuration names optimizers and schedulers by registered name only: a crafted YAML file
that names a dotted path is refused and nothing is imported; register_optimizer /
register_scheduler add names, and refuse names that are taken or targets that do not fit."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml

import accmt_trainer
from accmt_trainer import (
    HyperParameters,
    HyperParametersError,
    register_optimizer,
    register_scheduler,
)


class RegistryOptimizer(torch.optim.SGD):
    """Registered below as RegistryTestOptimizer."""


class OtherOptimizer(torch.optim.SGD):
    """Never registered: every attempt below is refused."""


class RegistryScheduler(torch.optim.lr_scheduler.ExponentialLR):
    """Registered below as RegistryTestScheduler."""


def halving(optimizer: torch.optim.Optimizer, every: int = 1) -> torch.optim.lr_scheduler.StepLR:
    """A scheduler factory, registered below as RegistryTestHalving."""
    return torch.optim.lr_scheduler.StepLR(optimizer, step_size=every, gamma=0.5)


# Registered once, at import, under names no other test module uses.
register_optimizer("RegistryTestOptimizer", RegistryOptimizer)
register_scheduler("RegistryTestScheduler", RegistryScheduler)
register_scheduler("RegistryTestHalving", halving)

TRAP_MODULE = "accmt_registry_trap"


def parameters() -> list[torch.nn.Parameter]:
    return [torch.nn.Parameter(torch.zeros(3))]


@pytest.fixture
def trap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A module on sys.path that creates the returned marker file when it is imported
    (forgotten afterwards, so that one failing test does not break the next)."""
    marker = tmp_path / "imported.marker"
    folder = tmp_path / "modules"
    folder.mkdir()
    (folder / f"{TRAP_MODULE}.py").write_text(
        "from pathlib import Path\n"
        "import torch\n"
        f"Path({str(marker)!r}).write_text('imported')\n"
        "class Evil(torch.optim.SGD):\n    pass\n"
        "class EvilScheduler(torch.optim.lr_scheduler.ExponentialLR):\n    pass\n"
    )
    monkeypatch.syspath_prepend(str(folder))
    assert TRAP_MODULE not in sys.modules
    yield marker
    sys.modules.pop(TRAP_MODULE, None)


def spring(marker: Path) -> None:
    """The trap works: importing the module does create the marker (then forget the module)."""
    try:
        importlib.import_module(TRAP_MODULE)
        assert marker.read_text() == "imported"
    finally:
        sys.modules.pop(TRAP_MODULE, None)


CRAFTED = {
    "optimizer": "hps:\n  optimizer:\n    type: {target}\n    lr: 0.1\n",
    "scheduler": "hps:\n  optimizer: {{type: SGD, lr: 0.1}}\n  scheduler:\n    type: {target}\n",
}


def write_crafted(path: Path, key: str, target: str) -> Path:
    path.write_text(CRAFTED[key].format(target=target))
    assert yaml.safe_load(path.read_text())["hps"][key]["type"] == target
    return path


def assert_refused(error: HyperParametersError, key: str, target: str, path: Path) -> None:
    assert error.key == f"hps.{key}.type"
    message = str(error)
    assert message.startswith(f"hps.{key}.type: ")
    for word in [repr(target), "never import", f"register_{key}(name, cls)", str(path)]:
        assert word in message


# --- crafted configurations -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "target"), [("optimizer", "os.system"), ("scheduler", "subprocess.Popen")]
)
def test_crafted_yaml_naming_a_callable_is_refused(tmp_path: Path, key: str, target: str) -> None:
    path = write_crafted(tmp_path / "crafted.yaml", key, target)
    with pytest.raises(HyperParametersError) as caught:
        HyperParameters.from_yaml(path)
    assert_refused(caught.value, key, target, path)


@pytest.mark.parametrize(("key", "name"), [("optimizer", "Evil"), ("scheduler", "EvilScheduler")])
def test_crafted_yaml_naming_a_module_never_imports_it(
    tmp_path: Path, trap: Path, key: str, name: str
) -> None:
    target = f"{TRAP_MODULE}.{name}"
    path = write_crafted(tmp_path / "crafted.yaml", key, target)
    with pytest.raises(HyperParametersError) as caught:
        HyperParameters.from_yaml(path)
    assert_refused(caught.value, key, target, path)
    assert not trap.exists()
    assert TRAP_MODULE not in sys.modules
    spring(trap)


@pytest.mark.parametrize("target", ["os.system", f"{TRAP_MODULE}.Evil"])
def test_trainer_refuses_a_crafted_yaml_before_writing_anything(
    tmp_path: Path, trap: Path, monkeypatch: pytest.MonkeyPatch, target: str
) -> None:
    path = write_crafted(tmp_path / "crafted.yaml", "optimizer", target)
    monkeypatch.chdir(tmp_path)
    before = sorted(tmp_path.rglob("*"))
    with pytest.raises(HyperParametersError) as caught:
        accmt_trainer.Trainer(path, tmp_path / "run")
    assert_refused(caught.value, "optimizer", target, path)
    assert not (tmp_path / "run").exists()
    assert sorted(tmp_path.rglob("*")) == before
    assert not trap.exists()
    assert TRAP_MODULE not in sys.modules


def test_a_crafted_dict_is_refused_too(trap: Path) -> None:
    with pytest.raises(HyperParametersError) as caught:
        HyperParameters.from_config({"optimizer": {"type": f"{TRAP_MODULE}.Evil"}})
    assert caught.value.key == "optimizer.type"
    assert "never import" in str(caught.value)
    assert not trap.exists()
    assert TRAP_MODULE not in sys.modules


# --- registered names -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "given", ["RegistryTestOptimizer", "registrytestoptimizer", "REGISTRYTESTOPTIMIZER"]
)
def test_a_registered_optimizer_name_any_case_builds_the_class(given: str) -> None:
    hps = HyperParameters.from_dict({"hps": {"optimizer": {"type": given, "lr": 0.5}}})
    assert hps.optimizer == "RegistryTestOptimizer"
    assert hps == HyperParameters(optimizer=RegistryOptimizer, optimizer_kwargs={"lr": 0.5})
    optimizer = hps.build_optimizer(parameters())
    assert type(optimizer) is RegistryOptimizer
    assert optimizer.param_groups[0]["lr"] == 0.5


@pytest.mark.parametrize(
    ("given", "kwargs", "kept", "built", "lr_after_two_steps"),
    [
        ("RegistryTestScheduler", {"gamma": 0.5}, "RegistryTestScheduler", RegistryScheduler, 0.25),
        ("registrytestscheduler", {"gamma": 0.5}, "RegistryTestScheduler", RegistryScheduler, 0.25),
        (
            "REGISTRYTESTHALVING",
            {"every": 2},
            "RegistryTestHalving",
            torch.optim.lr_scheduler.StepLR,
            0.5,
        ),
    ],
)
def test_a_registered_scheduler_name_any_case_builds_it(
    given: str, kwargs: dict[str, Any], kept: str, built: type, lr_after_two_steps: float
) -> None:
    hps = HyperParameters(optimizer_kwargs={"lr": 1.0}, scheduler=given, scheduler_kwargs=kwargs)
    assert hps.scheduler == kept
    optimizer = hps.build_optimizer(parameters())
    scheduler = hps.build_scheduler(optimizer, num_training_steps=4, num_epochs=1)
    assert type(scheduler) is built
    assert scheduler is not None
    for _ in range(2):
        optimizer.step()
        scheduler.step()
    assert optimizer.param_groups[0]["lr"] == pytest.approx(lr_after_two_steps)


def test_a_registered_class_given_in_python_is_kept_by_name() -> None:
    hps = HyperParameters(optimizer=RegistryOptimizer, scheduler=halving)
    assert (hps.optimizer, hps.scheduler) == ("RegistryTestOptimizer", "RegistryTestHalving")


@pytest.mark.parametrize(
    ("scheduler", "kwargs"), [(RegistryScheduler, {"gamma": 0.25}), (halving, {"every": 3})]
)
def test_registered_names_round_trip_through_yaml(
    tmp_path: Path, scheduler: Callable[..., Any], kwargs: dict[str, Any]
) -> None:
    hps = HyperParameters(
        optimizer=RegistryOptimizer,
        optimizer_kwargs={"lr": 0.5},
        scheduler=scheduler,
        scheduler_kwargs=kwargs,
    )
    path = tmp_path / "hps.yaml"
    hps.to_yaml(path)
    written = yaml.safe_load(path.read_text())["hps"]
    assert written["optimizer"] == {"type": "RegistryTestOptimizer", "lr": 0.5}
    assert written["scheduler"]["type"] == hps.scheduler
    assert written["scheduler"]["type"] in ("RegistryTestScheduler", "RegistryTestHalving")
    assert HyperParameters.from_yaml(path) == hps
    assert HyperParameters.from_dict(hps.to_dict()) == hps


def test_registering_the_same_target_again_is_allowed() -> None:
    register_optimizer("RegistryTestOptimizer", RegistryOptimizer)
    register_scheduler("RegistryTestHalving", halving)
    assert HyperParameters(optimizer=RegistryOptimizer).optimizer == "RegistryTestOptimizer"


# --- what register_* refuse -------------------------------------------------------------------


def _hps(kind: str, value: Any) -> HyperParameters:
    needed = {
        "StepLR": {"step_size": 1},
        "LinearWithWarmup": {"num_warmup_steps": 1},
        "RegistryTestScheduler": {"gamma": 0.5},
        RegistryScheduler: {"gamma": 0.5},
    }
    return HyperParameters(**{kind: value, f"{kind}_kwargs": needed.get(value, {})})


@pytest.mark.parametrize(
    ("register", "name", "target", "taken_by"),
    [
        (register_optimizer, "adamw", RegistryOptimizer, "torch.optim.AdamW"),
        (register_optimizer, "SGD", OtherOptimizer, "torch.optim.SGD"),
        (
            register_optimizer,
            "registrytestoptimizer",
            OtherOptimizer,
            "the registered 'RegistryTestOptimizer'",
        ),
        (register_scheduler, "StepLR", RegistryScheduler, "torch.optim.lr_scheduler.StepLR"),
        (register_scheduler, "LinearWithWarmup", halving, "the LinearWithWarmup schedule"),
        (
            register_scheduler,
            "RegistryTestScheduler",
            halving,
            "the registered 'RegistryTestScheduler'",
        ),
    ],
)
def test_register_refuses_a_name_already_taken(
    register: Callable[[str, Any], None], name: str, target: Any, taken_by: str
) -> None:
    kind = "optimizer" if register is register_optimizer else "scheduler"
    before = (_hps(kind, name), _hps(kind, target))
    for given in [name, name.lower(), name.upper()]:
        with pytest.raises(HyperParametersError) as caught:
            register(given, target)
        assert caught.value.key == f"register_{kind}"
        assert f"{given!r} already names {taken_by}" in str(caught.value)
    # The name still means what it meant, and the target did not get it.
    assert (_hps(kind, name), _hps(kind, target)) == before
    assert getattr(before[0], kind).lower() == name.lower()


@pytest.mark.parametrize(
    "target",
    [dict, torch.optim.lr_scheduler.StepLR, torch.optim.SGD([torch.zeros(1)]), "torch.optim.SGD"],
)
def test_register_optimizer_refuses_what_is_not_an_optimizer_class(target: Any) -> None:
    with pytest.raises(HyperParametersError) as caught:
        register_optimizer("RegistryTestNotAnOptimizer", target)
    assert caught.value.key == "register_optimizer"
    assert f"expected a torch.optim.Optimizer subclass, got {target!r}" in str(caught.value)
    with pytest.raises(HyperParametersError, match="not a registered optimizer"):
        HyperParameters(optimizer="RegistryTestNotAnOptimizer")


@pytest.mark.parametrize("target", [3, "torch.optim.lr_scheduler.StepLR"])
def test_register_scheduler_refuses_what_is_not_callable(target: Any) -> None:
    with pytest.raises(HyperParametersError) as caught:
        register_scheduler("RegistryTestNotAScheduler", target)
    assert caught.value.key == "register_scheduler"
    assert f"got {target!r}" in str(caught.value)
    with pytest.raises(HyperParametersError, match="not a registered scheduler"):
        HyperParameters(scheduler="RegistryTestNotAScheduler")


@pytest.mark.parametrize("name", ["my.optimizer", "os.system", "", "two words", 3])
def test_register_refuses_a_name_that_is_not_plain(name: Any) -> None:
    with pytest.raises(HyperParametersError) as caught:
        register_optimizer(name, OtherOptimizer)
    assert caught.value.key == "register_optimizer"
    assert f"expected a plain name, got {name!r}" in str(caught.value)
    assert HyperParameters(optimizer=OtherOptimizer).optimizer is OtherOptimizer
