"""From one trial's values to what it trains: a HyperParameters and get_module_fn's arguments."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from typing import Any

import attrs

from accmt_trainer.integration import HyperParameters, HyperParametersError

from ._errors import SearchSpaceError
from ._space import Assignment


@attrs.frozen
class TrialConfig:
    """What one trial trains with."""

    hps: HyperParameters
    module_kwargs: dict[str, Any]


def resolve(assignment: Assignment, file: str | None = None) -> TrialConfig:
    """The HyperParameters and module arguments of ``assignment``. Errors are
    :class:`SearchSpaceError` naming the parameter as the space names it."""
    fields: dict[str, Any] = {}
    kwargs: dict[str, dict[str, Any]] = {"optimizer_kwargs": {}, "scheduler_kwargs": {}}
    module_kwargs: dict[str, Any] = {}
    for name, value in assignment.values.items():
        head, _, tail = name.partition(".")
        if head == "module":
            module_kwargs[tail] = value
        elif head in kwargs and tail:
            kwargs[head][tail] = value
        else:
            fields[name] = value
    for name, arguments in kwargs.items():
        # A whole mapping (optimizer_kwargs: {type: categorical, ...}), then single arguments.
        if arguments or name not in fields:
            fields[name] = {**(fields.get(name) or {}), **arguments}
    try:
        hps = HyperParameters(**fields)
    except HyperParametersError as error:
        # An error about all of a scheduler's (or optimizer's) arguments is the scheduler's.
        key = error.key.removesuffix("_kwargs") if error.key in kwargs else error.key
        raise SearchSpaceError(key, error.problem, file) from None
    return TrialConfig(hps, module_kwargs)


def check_module_arguments(
    get_module_fn: Callable[..., Any], names: Iterable[str], file: str | None = None
) -> None:
    """Every ``module.<name>`` of the space is a keyword argument of ``get_module_fn``."""
    try:
        parameters = inspect.signature(get_module_fn).parameters
    except (TypeError, ValueError):
        return
    if any(parameter.kind is parameter.VAR_KEYWORD for parameter in parameters.values()):
        return
    takes = {
        name
        for name, parameter in parameters.items()
        if parameter.kind in (parameter.POSITIONAL_OR_KEYWORD, parameter.KEYWORD_ONLY)
    }
    for name in names:
        head, _, tail = name.partition(".")
        if head == "module" and tail not in takes:
            listed = ", ".join(sorted(takes)) or "none"
            raise SearchSpaceError(
                name,
                f"get_module_fn ({getattr(get_module_fn, '__qualname__', get_module_fn)!r}) takes "
                f"no argument {tail!r}; its keyword arguments: {listed}",
                file,
            )
