"""The optimizers and schedulers a configuration may name.

A YAML file or a dict names an optimizer or a scheduler by a registered name only: torch's own
(``"AdamW"``, ``"CosineAnnealingLR"``), the warmup schedules (``"LinearWithWarmup"``...), and those
a program adds with :func:`register_optimizer` / :func:`register_scheduler`. A dotted path such as
``os.system`` is refused and never imported: reading a configuration must not run code. Python code
may still pass a class directly.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

from torch import optim
from torch.optim import Optimizer, lr_scheduler
from torch.optim.lr_scheduler import LRScheduler

from .._errors import HyperParametersError
from ._option_checks import suggest
from ._schedulers import WARMUP_SCHEDULES


def _public_subclasses(namespace: Mapping[str, Any], base: type) -> dict[str, Any]:
    return {
        name: value
        for name, value in namespace.items()
        if not name.startswith("_")
        and isinstance(value, type)
        and issubclass(value, base)
        and value is not base
    }


def _takes_optimizer_first(scheduler: type) -> bool:
    parameters = list(inspect.signature(scheduler).parameters)
    return bool(parameters) and parameters[0] == "optimizer"


OPTIMIZERS: dict[str, type[Optimizer]] = _public_subclasses(vars(optim), Optimizer)
# ChainedScheduler takes schedulers, not an optimizer, first: it cannot be built from a config.
TORCH_SCHEDULERS: dict[str, type[LRScheduler]] = {
    name: scheduler
    for name, scheduler in _public_subclasses(vars(lr_scheduler), LRScheduler).items()
    if _takes_optimizer_first(scheduler)
}
SCHEDULERS: dict[str, Callable[..., LRScheduler]] = {**WARMUP_SCHEDULES, **TORCH_SCHEDULERS}
_BUILT_IN = {"optimizer": frozenset(OPTIMIZERS), "scheduler": frozenset(SCHEDULERS)}
_REGISTRIES: dict[str, dict[str, Any]] = {"optimizer": OPTIMIZERS, "scheduler": SCHEDULERS}


def register_optimizer(name: str, optimizer: type[Optimizer]) -> None:
    """Let configurations name ``optimizer`` (a ``torch.optim.Optimizer`` subclass) as ``name``."""
    if not (isinstance(optimizer, type) and issubclass(optimizer, Optimizer)):
        raise HyperParametersError(
            "register_optimizer", f"expected a torch.optim.Optimizer subclass, got {optimizer!r}"
        )
    _register("optimizer", name, optimizer)


def register_scheduler(name: str, scheduler: Callable[..., LRScheduler]) -> None:
    """Let configurations name ``scheduler`` (an ``LRScheduler`` subclass, or a function of the
    optimizer and keyword arguments returning one) as ``name``."""
    if not callable(scheduler) or (
        isinstance(scheduler, type) and not issubclass(scheduler, LRScheduler)
    ):
        raise HyperParametersError(
            "register_scheduler", f"expected an LRScheduler class or factory, got {scheduler!r}"
        )
    _register("scheduler", name, scheduler)


def _register(kind: str, name: str, target: Any) -> None:
    if not isinstance(name, str) or not name.isidentifier():
        raise HyperParametersError(f"register_{kind}", f"expected a plain name, got {name!r}")
    registry = _REGISTRIES[kind]
    taken = {known.lower(): known for known in registry}.get(name.lower())
    if taken is not None and (taken in _BUILT_IN[kind] or registry[taken] is not target):
        raise HyperParametersError(f"register_{kind}", f"{name!r} already names {describe(taken)}")
    if taken is None:
        # One name per target, so that a class given in Python reads back under that name.
        registry[name] = target


def resolve(value: Any, kind: str, base: type) -> Any:
    """A registered name (any case; kept as registered), or a ``base`` subclass passed from
    Python (kept by name when registered)."""
    registry = _REGISTRIES[kind]
    if isinstance(value, str):
        if "." in value:
            raise HyperParametersError(
                kind,
                f"{value!r} is a dotted path; configurations name registered {kind}s only and "
                f"never import modules. Register it in Python with register_{kind}(name, "
                f"cls) and write its name, or pass the class itself",
            )
        name = {known.lower(): known for known in registry}.get(value.lower())
        if name is None:
            raise HyperParametersError(
                kind, f"{value!r} is not a registered {kind}{suggest(value, registry)}"
            )
        return name
    if kind == "optimizer" and not (isinstance(value, type) and issubclass(value, base)):
        raise HyperParametersError(
            kind, f"expected a registered name or a {base.__name__} subclass, got {value!r}"
        )
    is_other_class = isinstance(value, type) and not issubclass(value, base)
    if kind == "scheduler" and (not callable(value) or is_other_class):
        raise HyperParametersError(
            kind, f"expected a registered name or an LRScheduler subclass, got {value!r}"
        )
    return registered_name(value, kind) or value


def registered_name(target: Any, kind: str) -> str | None:
    """The name ``target`` is registered under, if any."""
    for name, known in _REGISTRIES[kind].items():
        if known is target:
            return name
    return None


def optimizer_class(optimizer: str | type[Optimizer]) -> type[Optimizer]:
    return OPTIMIZERS[optimizer] if isinstance(optimizer, str) else optimizer


def scheduler_factory(scheduler: str | Callable[..., LRScheduler]) -> Callable[..., LRScheduler]:
    return SCHEDULERS[scheduler] if isinstance(scheduler, str) else scheduler


def describe(target: Any) -> str:
    if not isinstance(target, str):
        return f"{getattr(target, '__module__', '?')}.{getattr(target, '__qualname__', target)}"
    if target in TORCH_SCHEDULERS:
        return f"torch.optim.lr_scheduler.{target}"
    if target in WARMUP_SCHEDULES:
        return f"the {target} schedule"
    found = OPTIMIZERS.get(target)
    if found is not None and found.__module__.startswith("torch.optim"):
        return f"torch.optim.{target}"
    return f"the registered {target!r}"
