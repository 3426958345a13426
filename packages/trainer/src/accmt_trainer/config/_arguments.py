"""The arguments of an optimizer or a scheduler: checked against its signature when the
HyperParameters are made, and those that size a schedule filled from the run."""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Collection, Mapping
from typing import Any

from .._errors import HyperParametersError
from ._option_checks import suggest
from ._registry import describe


def keyword_parameters(target: Callable[..., Any]) -> dict[str, inspect.Parameter] | None:
    """The keyword arguments ``target`` takes after its first (the parameters or the optimizer);
    None when that cannot be known (no signature, or ``**kwargs``)."""
    try:
        parameters = list(inspect.signature(target).parameters.values())
    except (TypeError, ValueError):
        return None
    if any(parameter.kind is parameter.VAR_KEYWORD for parameter in parameters):
        return None
    if parameters and parameters[0].kind in (
        inspect.Parameter.POSITIONAL_ONLY,
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
    ):
        parameters = parameters[1:]
    return {
        parameter.name: parameter
        for parameter in parameters
        if parameter.kind in (parameter.POSITIONAL_OR_KEYWORD, parameter.KEYWORD_ONLY)
    }


# Scheduler arguments that build_scheduler takes from the run when they are not given.
_FILLED_FROM_THE_RUN = frozenset(
    {"num_training_steps", "total_iters", "T_max", "total_steps", "epochs", "steps_per_epoch"}
)
_SIZED_BY_EPOCHS = frozenset({"epochs", "steps_per_epoch"})


def join(location: str, name: object) -> str:
    return f"{location}.{name}" if location else str(name)


def unknown_error(
    location: str, names: list[Any], known: Collection[str], owner: str, noun: str
) -> HyperParametersError:
    listed = ", ".join(f"{name!r}{suggest(name, known)}" for name in names)
    if len(names) == 1:
        return HyperParametersError(join(location, names[0]), f"{owner} takes no {noun} {listed}")
    return HyperParametersError(location or "hyperparameters", f"{owner} takes no {noun}s {listed}")


def check_int(key: str, value: Any, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise HyperParametersError(key, f"expected an int, got {value!r}")
    if value < minimum:
        raise HyperParametersError(key, f"must be at least {minimum}, got {value}")


def check_arguments(
    field: str, kwargs: Mapping[str, Any], target: str | type, factory: Callable[..., Any]
) -> None:
    """Every key of ``kwargs`` is an argument of ``factory``, and every argument it needs is given
    or filled from the run by ``build_scheduler``."""
    parameters = keyword_parameters(factory)
    if parameters is None:
        return
    accepted = set(parameters)
    if "num_warmup_steps" in accepted:
        accepted.add("warmup_ratio")
    unknown = [key for key in kwargs if key not in accepted]
    if unknown:
        raise unknown_error(field, unknown, sorted(accepted), describe(target), "argument")
    fillable = _FILLED_FROM_THE_RUN if field == "scheduler_kwargs" else frozenset()
    missing = [
        name
        for name, parameter in parameters.items()
        if parameter.default is parameter.empty
        and name not in kwargs
        and name not in fillable
        and not (name == "num_warmup_steps" and "warmup_ratio" in kwargs)
    ]
    if missing:
        needed = ", ".join(
            "'num_warmup_steps' (or 'warmup_ratio')" if name == "num_warmup_steps" else repr(name)
            for name in missing
        )
        raise HyperParametersError(field, f"{describe(target)} needs {needed}")


def fill_from_the_run(
    kwargs: Mapping[str, Any],
    parameters: Mapping[str, inspect.Parameter] | None,
    num_training_steps: int,
    num_epochs: int,
) -> dict[str, Any]:
    """The scheduler's arguments with those the run decides added, each sized once to the real
    number of scheduler steps."""
    filled = dict(kwargs)
    ratio = filled.pop("warmup_ratio", None)
    if ratio is not None:
        filled["num_warmup_steps"] = round(ratio * num_training_steps)
    if parameters is None:
        return filled
    for name in ("num_training_steps", "total_iters", "T_max"):
        if name in parameters and name not in filled:
            filled[name] = num_training_steps
    by_epochs_given = bool(_SIZED_BY_EPOCHS & filled.keys())
    if "total_steps" in parameters and "total_steps" not in filled and not by_epochs_given:
        filled["total_steps"] = num_training_steps
    elif "total_steps" not in filled:
        # Sized as epochs x steps per epoch (OneCycleLR when given either, or a scheduler that
        # requires them): fill whichever is missing.
        for name in ("epochs", "steps_per_epoch"):
            parameter = parameters.get(name)
            if parameter is None or name in filled:
                continue
            if by_epochs_given or parameter.default is parameter.empty:
                epochs = filled.get("epochs", num_epochs)
                if name == "epochs":
                    filled[name] = num_epochs
                elif isinstance(epochs, int) and epochs > 0:
                    filled[name] = math.ceil(num_training_steps / epochs)
    return filled
