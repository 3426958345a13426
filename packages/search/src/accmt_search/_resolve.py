"""From one trial's values to what it trains: a HyperParameters and get_module_fn's arguments."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable
from typing import Any

import attrs

from accmt_trainer import HyperParameters, HyperParametersError

from ._errors import SearchSpaceError
from ._space import FIELDS, Assignment

# The optimizer argument each 1.x name sets (beta1 and beta2 set ``betas`` together).
_OPTIMIZER_ARGUMENTS = {"learning_rate": "lr", "eps": "eps", "weight_decay": "weight_decay"}


@attrs.frozen
class TrialConfig:
    """What one trial trains with."""

    hps: HyperParameters
    module_kwargs: dict[str, Any]


def resolve(assignment: Assignment, file: str | None = None) -> TrialConfig:
    """The HyperParameters and module arguments of ``assignment``.

    A 1.x default that the chosen optimizer or scheduler does not take (``betas`` for SGD, a
    warmup for a scheduler without one) is dropped; one the user gave is an error. Errors are
    :class:`SearchSpaceError` naming the parameter as the space names it.
    """
    values, explicit = assignment.values, assignment.explicit
    fields: dict[str, Any] = {name: values[name] for name in FIELDS if name in values}
    kwargs: dict[str, dict[str, Any]] = {"optimizer": {}, "scheduler": {}}
    module_kwargs: dict[str, Any] = {}
    # Where each setting came from, to name it in errors and to know the 1.x defaults.
    origin: dict[str, str] = {}
    for name, value in values.items():
        head, _, tail = name.partition(".")
        if head == "module":
            module_kwargs[tail] = value
        elif head in ("optimizer_kwargs", "scheduler_kwargs"):
            kwargs[head.removesuffix("_kwargs")][tail] = value
            origin[name] = name
    _one_x_settings(values, explicit, fields, kwargs, origin)
    for owner in ("optimizer", "scheduler"):
        for argument in list(kwargs[owner]):
            name = origin[f"{owner}_kwargs.{argument}"]
            if name not in explicit and not _takes(owner, fields.get(owner), argument):
                del kwargs[owner][argument]
    try:
        hps = HyperParameters(
            **fields, optimizer_kwargs=kwargs["optimizer"], scheduler_kwargs=kwargs["scheduler"]
        )
    except HyperParametersError as error:
        raise SearchSpaceError(_space_name(error.key, origin), error.problem, file) from None
    return TrialConfig(hps, module_kwargs)


def _one_x_settings(
    values: dict[str, Any],
    explicit: frozenset[str],
    fields: dict[str, Any],
    kwargs: dict[str, dict[str, Any]],
    origin: dict[str, str],
) -> None:
    """Put the 1.x names' values where HyperParameters takes them."""
    if "train_batch_size" in values:
        train, evaluation = values["train_batch_size"], values.get("eval_batch_size")
        fields["batch_size"] = (train, train if evaluation is None else evaluation)
        origin["batch_size[0]"], origin["batch_size[1]"] = "train_batch_size", "eval_batch_size"
    for name, argument in _OPTIMIZER_ARGUMENTS.items():
        if name in values:
            kwargs["optimizer"][argument] = values[name]
            origin[f"optimizer_kwargs.{argument}"] = name
    if "beta1" in values and "beta2" in values:
        kwargs["optimizer"]["betas"] = (values["beta1"], values["beta2"])
        origin["optimizer_kwargs.betas"] = "beta2" if "beta1" not in explicit else "beta1"
    if "warmup_ratio" in values:
        kwargs["scheduler"]["warmup_ratio"] = values["warmup_ratio"]
        origin["scheduler_kwargs.warmup_ratio"] = "warmup_ratio"


@functools.lru_cache(maxsize=256)
def _takes(owner: str, target: Any, argument: str) -> bool:
    """Whether the optimizer or scheduler ``target`` takes ``argument`` (False when there is no
    scheduler), as HyperParameters decides: it names an argument it does not take."""
    if target is None:
        return False
    try:
        HyperParameters(**{owner: target, f"{owner}_kwargs": {argument: 0.0}})
    except HyperParametersError as error:
        return error.key != f"{owner}_kwargs.{argument}"
    return True


def _space_name(key: str, origin: dict[str, str]) -> str:
    """The space's name for a HyperParameters error key (``optimizer_kwargs.lr`` came from
    ``learning_rate``; an error about all of a scheduler's arguments is the scheduler's); the
    key itself when no parameter of the space set it."""
    if key in ("optimizer_kwargs", "scheduler_kwargs"):
        return key.removesuffix("_kwargs")
    for setting, name in origin.items():
        if key == setting or key.startswith(f"{setting}."):
            return name
    return key


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
