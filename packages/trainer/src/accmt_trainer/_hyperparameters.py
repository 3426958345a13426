"""The hyperparameters of a run: epochs, batch size, optimizer and scheduler.

Built from Python, from a dict (flat, or in accmt 1.x's ``hps:`` layout) or from a YAML file in
that layout. attrs converters and validators check every value when the object is made, so a
bad configuration fails where it is read, with the key that is wrong.
"""

from __future__ import annotations

import difflib
import inspect
import math
import os
import pkgutil
import re
from collections.abc import Callable, Collection, Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs
import yaml
from torch import optim
from torch.optim import Optimizer, lr_scheduler
from torch.optim.lr_scheduler import LRScheduler

from ._schedulers import WARMUP_SCHEDULES


class HyperParametersError(ValueError):
    """A hyperparameter is unknown or has a bad value.

    ``key`` says where, as written in the configuration (``"epochs"``,
    ``"hps.optimizer.type"``, ``"scheduler_kwargs.num_warmup_steps"``); ``problem`` says what is
    wrong. ``str(error)`` is ``"key: problem"``.
    """

    def __init__(self, key: str, problem: str) -> None:
        super().__init__(f"{key}: {problem}")
        self.key = key
        self.problem = problem

    def __reduce__(self) -> tuple[type[HyperParametersError], tuple[str, str]]:
        return type(self), (self.key, self.problem)


def _public_subclasses(namespace: Mapping[str, Any], base: type) -> dict[str, Any]:
    return {
        name: value
        for name, value in namespace.items()
        if not name.startswith("_")
        and isinstance(value, type)
        and issubclass(value, base)
        and value is not base
    }


def _parameters(target: Callable[..., Any]) -> dict[str, inspect.Parameter] | None:
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


def _takes_optimizer_first(scheduler: type) -> bool:
    parameters = list(inspect.signature(scheduler).parameters)
    return bool(parameters) and parameters[0] == "optimizer"


_OPTIMIZERS: dict[str, type[Optimizer]] = _public_subclasses(vars(optim), Optimizer)
# ChainedScheduler takes schedulers, not an optimizer, first: it cannot be built from a config.
_TORCH_SCHEDULERS: dict[str, type[LRScheduler]] = {
    name: scheduler
    for name, scheduler in _public_subclasses(vars(lr_scheduler), LRScheduler).items()
    if _takes_optimizer_first(scheduler)
}
_SCHEDULER_NAMES = [*WARMUP_SCHEDULES, *_TORCH_SCHEDULERS]
_KNOWN_NAMES = {
    "optimizer": "an optimizer in torch.optim",
    "scheduler": f"a scheduler in torch.optim.lr_scheduler or one of {', '.join(WARMUP_SCHEDULES)}",
}

# Scheduler arguments that build_scheduler takes from the run when they are not given.
_FILLED_FROM_THE_RUN = frozenset(
    {"num_training_steps", "total_iters", "T_max", "total_steps", "epochs", "steps_per_epoch"}
)
_SIZED_BY_EPOCHS = frozenset({"epochs", "steps_per_epoch"})

_INT = re.compile(r"[+-]?\d+")
_FLOAT = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def _suggest(name: object, candidates: Iterable[str]) -> str:
    """`` (did you mean 'x' or 'y'?)`` for the closest candidates, compared without case; else
    ``""``."""
    by_lower = {candidate.lower(): candidate for candidate in candidates}
    close = [
        repr(by_lower[match]) for match in difflib.get_close_matches(str(name).lower(), by_lower)
    ]
    if not close:
        return ""
    listed = close[0] if len(close) == 1 else f"{', '.join(close[:-1])} or {close[-1]}"
    return f" (did you mean {listed}?)"


def _join(location: str, name: object) -> str:
    return f"{location}.{name}" if location else str(name)


def _unknown(
    location: str, names: list[Any], known: Collection[str], owner: str, noun: str
) -> HyperParametersError:
    listed = ", ".join(f"{name!r}{_suggest(name, known)}" for name in names)
    if len(names) == 1:
        return HyperParametersError(_join(location, names[0]), f"{owner} takes no {noun} {listed}")
    return HyperParametersError(location or "hyperparameters", f"{owner} takes no {noun}s {listed}")


def _check_int(key: str, value: Any, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise HyperParametersError(key, f"expected an int, got {value!r}")
    if value < minimum:
        raise HyperParametersError(key, f"must be at least {minimum}, got {value}")


def _at_least_one(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    _check_int(attribute.name, value, 1)


def _none_or_at_least_one(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None:
        _check_int(attribute.name, value, 1)


def _is_bool(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, bool):
        raise HyperParametersError(attribute.name, f"expected true or false, got {value!r}")


def _to_batch_size(value: int | tuple[int, int] | list[int]) -> int | tuple[int, int]:
    if isinstance(value, (list, tuple)):
        if len(value) != 2:
            raise HyperParametersError(
                "batch_size", f"expected an int or a (train, val) pair, got {value!r}"
            )
        train, val = value
        _check_int("batch_size[0]", train, 1)
        _check_int("batch_size[1]", val, 1)
        return (train, val)
    _check_int("batch_size", value, 1)
    return value


def _import(path: str, key: str) -> Any:
    try:
        return pkgutil.resolve_name(path)
    except (ImportError, AttributeError, ValueError) as error:
        raise HyperParametersError(key, f"cannot import {path!r}: {error}") from None


def _import_path(cls: type, key: str) -> str:
    """``module.QualName`` of ``cls``, checked to import back to ``cls``."""
    path = f"{cls.__module__}.{cls.__qualname__}"
    try:
        found = pkgutil.resolve_name(path)
    except (ImportError, AttributeError, ValueError):
        found = None
    if found is not cls:
        raise HyperParametersError(
            key, f"{path} cannot be written down: it does not import back from that path"
        )
    return path


def _resolve(
    value: Any, field: str, names: Collection[str], torch_classes: Mapping[str, type], base: type
) -> Any:
    """A name from ``names`` (any case; kept as spelled there), or a subclass of ``base`` or its
    dotted import path. Classes that ``torch_classes`` holds are kept by their name."""
    if isinstance(value, str) and "." not in value:
        name = {known.lower(): known for known in names}.get(value.lower())
        if name is None:
            raise HyperParametersError(
                field, f"{value!r} is not {_KNOWN_NAMES[field]}{_suggest(value, names)}"
            )
        return name
    cls = _import(value, field) if isinstance(value, str) else value
    if not (isinstance(cls, type) and issubclass(cls, base)):
        raise HyperParametersError(
            field,
            f"expected the name of {_KNOWN_NAMES[field]} or a subclass of {_describe(base)}, "
            f"got {value!r}",
        )
    return cls.__name__ if torch_classes.get(cls.__name__) is cls else cls


def _to_optimizer(value: str | type[Optimizer]) -> str | type[Optimizer]:
    """A torch.optim class by its name (any case), or an Optimizer subclass (or its dotted import
    path). torch.optim's own classes are kept by name."""
    resolved: str | type[Optimizer] = _resolve(
        value, "optimizer", _OPTIMIZERS, _OPTIMIZERS, Optimizer
    )
    return resolved


def _to_scheduler(value: str | type[LRScheduler] | None) -> str | type[LRScheduler] | None:
    """A torch.optim.lr_scheduler class or accmt 1.x schedule by its name (any case), an
    LRScheduler subclass (or its dotted import path), or None. torch's classes are kept by
    name."""
    if value is None:
        return None
    resolved: str | type[LRScheduler] = _resolve(
        value, "scheduler", _SCHEDULER_NAMES, _TORCH_SCHEDULERS, LRScheduler
    )
    return resolved


def _plain(value: Any) -> Any:
    """Numeric strings become numbers (YAML reads ``1e-6`` as a string); lists become tuples
    (``betas: [0.9, 0.98]``), recursively."""
    if isinstance(value, str):
        text = value.strip()
        if _INT.fullmatch(text):
            return int(text)
        if _FLOAT.fullmatch(text):
            return float(text)
        return value
    if isinstance(value, (list, tuple)):
        return tuple(_plain(item) for item in value)
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    return value


def _to_kwargs(value: Mapping[str, Any] | None, field: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise HyperParametersError(field, f"expected a mapping of argument names, got {value!r}")
    for key in value:
        if not isinstance(key, str):
            raise HyperParametersError(field, f"argument names must be strings, got {key!r}")
    return {key: _plain(item) for key, item in value.items()}


def _to_optimizer_kwargs(value: Mapping[str, Any] | None) -> dict[str, Any]:
    return _to_kwargs(value, "optimizer_kwargs")


def _to_scheduler_kwargs(value: Mapping[str, Any] | None) -> dict[str, Any]:
    """Also: a float ``num_warmup_steps`` in [0, 1] is a ratio of the training steps, as in
    accmt 1.x, and is kept as ``warmup_ratio``; a whole float (``1e3``) is an int."""
    kwargs = _to_kwargs(value, "scheduler_kwargs")
    if "num_warmup_steps" in kwargs and "warmup_ratio" in kwargs:
        raise HyperParametersError(
            "scheduler_kwargs", "give num_warmup_steps or warmup_ratio, not both"
        )
    steps = kwargs.get("num_warmup_steps")
    if isinstance(steps, float) and 0.0 <= steps <= 1.0:
        kwargs["warmup_ratio"] = kwargs.pop("num_warmup_steps")
    elif isinstance(steps, float) and steps.is_integer():
        kwargs["num_warmup_steps"] = int(steps)
    if "num_warmup_steps" in kwargs:
        _check_int("scheduler_kwargs.num_warmup_steps", kwargs["num_warmup_steps"], 0)
    if "warmup_ratio" in kwargs:
        ratio = kwargs["warmup_ratio"]
        if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0 <= ratio <= 1:
            raise HyperParametersError(
                "scheduler_kwargs.warmup_ratio", f"expected a number in [0, 1], got {ratio!r}"
            )
        kwargs["warmup_ratio"] = float(ratio)
    if "num_training_steps" in kwargs:
        _check_int("scheduler_kwargs.num_training_steps", kwargs["num_training_steps"], 1)
    return kwargs


def _optimizer_class(optimizer: str | type[Optimizer]) -> type[Optimizer]:
    return _OPTIMIZERS[optimizer] if isinstance(optimizer, str) else optimizer


def _scheduler_factory(scheduler: str | type[LRScheduler]) -> Callable[..., LRScheduler]:
    if isinstance(scheduler, type):
        return scheduler
    return WARMUP_SCHEDULES.get(scheduler) or _TORCH_SCHEDULERS[scheduler]


def _describe(target: str | type) -> str:
    if isinstance(target, type):
        return f"{target.__module__}.{target.__qualname__}"
    if target in _OPTIMIZERS:
        return f"torch.optim.{target}"
    if target in _TORCH_SCHEDULERS:
        return f"torch.optim.lr_scheduler.{target}"
    return f"the {target} schedule"


def _check_arguments(
    field: str, kwargs: Mapping[str, Any], target: str | type, factory: Callable[..., Any]
) -> None:
    """Every key of ``kwargs`` is an argument of ``factory``, and every argument it needs is given
    or filled from the run by ``build_scheduler``."""
    parameters = _parameters(factory)
    if parameters is None:
        return
    accepted = set(parameters)
    if "num_warmup_steps" in accepted:
        accepted.add("warmup_ratio")
    unknown = [key for key in kwargs if key not in accepted]
    if unknown:
        raise _unknown(field, unknown, sorted(accepted), _describe(target), "argument")
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
        raise HyperParametersError(field, f"{_describe(target)} needs {needed}")


def _fill_from_the_run(
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


def _lists(value: Any) -> Any:
    """``value`` with its tuples, at any depth, as lists (the reverse of :func:`_plain`)."""
    if isinstance(value, (list, tuple)):
        return [_lists(item) for item in value]
    if isinstance(value, Mapping):
        return {key: _lists(item) for key, item in value.items()}
    return value


def _serialize(instance: Any, field: attrs.Attribute[Any] | None, value: Any) -> Any:
    """``attrs.asdict`` hook: classes become import paths, tuples become lists."""
    if field is not None and field.name in ("optimizer", "scheduler") and isinstance(value, type):
        return _import_path(value, field.name)
    return _lists(value) if field is not None else value


@attrs.frozen(init=False)
class HyperParameters:
    """What a run trains with, checked when it is made.

    - ``epochs``: passes over the training data, at least 1.
    - ``max_steps``: a cap on optimizer steps (at least 1), or None.
    - ``batch_size``: an int, or a ``(train, val)`` pair; each at least 1.
    - ``optimizer``: the name of a torch.optim optimizer (any case: ``"adamw"`` is kept as
      ``"AdamW"``), an ``Optimizer`` subclass, or its dotted import path; ``optimizer_kwargs``
      are its arguments, such as ``{"lr": 1e-3}``.
    - ``scheduler``: None (constant learning rate), the name of a torch.optim.lr_scheduler class,
      one of accmt 1.x's schedules (``LinearWithWarmup``, ``CosineWithWarmup``, ``Constant``,
      ``ConstantWithWarmup``, ``CosineWithHardRestartsWithWarmup``, ``InverseSQRT``,
      ``PolynomialDecayWithWarmup``), an ``LRScheduler`` subclass or its dotted import path.
      ``scheduler_kwargs`` are its arguments; warmup is given as ``num_warmup_steps`` or as
      ``warmup_ratio``, a fraction of the training steps. The arguments that size a schedule to
      the run (``num_training_steps``, ``total_iters``, ``T_max``, ``total_steps``...) are
      filled by :meth:`build_scheduler` when not given.
    - ``step_scheduler_per_epoch``: step the scheduler once per epoch, not per optimizer step.

    In the kwargs, numeric strings (``"1e-6"``, as YAML reads it) become numbers and lists become
    tuples. Arguments that the optimizer or the scheduler does not take are an error, as is any
    bad value: :class:`HyperParametersError` names the key.

    accmt 1.x's spellings are accepted here as in :meth:`from_dict`: ``optim_kwargs`` for
    ``optimizer_kwargs``, ``optim`` for ``optimizer``, and an optimizer or scheduler given as a
    mapping with its name under ``"type"`` (``optimizer={"type": "AdamW", "lr": 1e-3}``).
    """

    epochs: int = attrs.field(default=1, validator=_at_least_one)
    max_steps: int | None = attrs.field(default=None, validator=_none_or_at_least_one)
    batch_size: int | tuple[int, int] = attrs.field(default=1, converter=_to_batch_size)
    optimizer: str | type[Optimizer] = attrs.field(default="SGD", converter=_to_optimizer)
    optimizer_kwargs: dict[str, Any] = attrs.field(factory=dict, converter=_to_optimizer_kwargs)
    scheduler: str | type[LRScheduler] | None = attrs.field(default=None, converter=_to_scheduler)
    scheduler_kwargs: dict[str, Any] = attrs.field(factory=dict, converter=_to_scheduler_kwargs)
    step_scheduler_per_epoch: bool = attrs.field(default=False, validator=_is_bool)

    def __init__(
        self,
        epochs: int = 1,
        max_steps: int | None = None,
        batch_size: int | tuple[int, int] | list[int] = 1,
        optimizer: str | type[Optimizer] | Mapping[str, Any] = "SGD",
        optimizer_kwargs: Mapping[str, Any] | None = None,
        scheduler: str | type[LRScheduler] | Mapping[str, Any] | None = None,
        scheduler_kwargs: Mapping[str, Any] | None = None,
        step_scheduler_per_epoch: bool = False,
        *,
        optim: str | type[Optimizer] | Mapping[str, Any] | None = None,
        optim_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        # The defaults repeat the fields' (a test keeps them equal). Every argument goes through
        # the same reading of accmt 1.x's spellings as from_dict, so both accept the same.
        given: dict[str, Any] = {
            "epochs": epochs,
            "max_steps": max_steps,
            "batch_size": batch_size,
            "optimizer": optimizer,
            "optimizer_kwargs": optimizer_kwargs,
            "scheduler": scheduler,
            "scheduler_kwargs": scheduler_kwargs,
            "step_scheduler_per_epoch": step_scheduler_per_epoch,
            "optim": optim,
            "optim_kwargs": optim_kwargs,
        }
        # None means "not given" for the kwargs and for optim; so does the default optimizer
        # when optim names one.
        if optim is not None and isinstance(optimizer, str) and optimizer == "SGD":
            del given["optimizer"]
        optional = ("optimizer_kwargs", "scheduler_kwargs", "optim", "optim_kwargs")
        arguments, where = _arguments(
            {k: v for k, v in given.items() if not (k in optional and v is None)}
        )
        try:
            self.__attrs_init__(**arguments)
        except HyperParametersError as error:
            raise _where_given(error, where) from None

    def __attrs_post_init__(self) -> None:
        _check_arguments(
            "optimizer_kwargs",
            self.optimizer_kwargs,
            self.optimizer,
            _optimizer_class(self.optimizer),
        )
        if self.scheduler is None:
            if self.scheduler_kwargs:
                raise HyperParametersError(
                    "scheduler_kwargs",
                    f"{', '.join(map(repr, self.scheduler_kwargs))} given, but no scheduler",
                )
            return
        _check_arguments(
            "scheduler_kwargs",
            self.scheduler_kwargs,
            self.scheduler,
            _scheduler_factory(self.scheduler),
        )

    @property
    def train_batch_size(self) -> int:
        """The training batch size."""
        return self.batch_size if isinstance(self.batch_size, int) else self.batch_size[0]

    @property
    def val_batch_size(self) -> int:
        """The validation batch size (the training one unless a pair was given)."""
        return self.batch_size if isinstance(self.batch_size, int) else self.batch_size[1]

    @classmethod
    def from_config(
        cls, config: HyperParameters | Mapping[str, Any] | str | os.PathLike[str]
    ) -> HyperParameters:
        """``config`` itself, or built from a dict (:meth:`from_dict`) or a YAML path
        (:meth:`from_yaml`)."""
        if isinstance(config, HyperParameters):
            return config
        if isinstance(config, Mapping):
            return cls.from_dict(config)
        if isinstance(config, (str, os.PathLike)):
            return cls.from_yaml(config)
        raise HyperParametersError(
            "config",
            f"expected HyperParameters, a mapping or a YAML path, got {type(config).__name__}",
        )

    @classmethod
    def from_yaml(cls, path: str | os.PathLike[str]) -> HyperParameters:
        """Read a YAML file in accmt 1.x's layout (``hps:`` with ``optimizer: {type: ...}``) or
        with the field names at the top level. Errors name the key and the file."""
        with open(path, encoding="utf-8") as stream:
            data = yaml.safe_load(stream)
        try:
            return cls.from_dict({} if data is None else data)
        except HyperParametersError as error:
            raise HyperParametersError(error.key, f"{error.problem} (in {path})") from None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> HyperParameters:
        """Build from a dict with the field names, or in accmt 1.x's layout::

            {"hps": {"epochs": 3, "batch_size": 32,
                     "optimizer": {"type": "AdamW", "lr": 1e-3},
                     "scheduler": {"type": "LinearWithWarmup", "warmup_ratio": 0.1}}}

        ``optim`` is read as ``optimizer`` (older 1.x files) and ``optim_kwargs`` as
        ``optimizer_kwargs``. Unknown keys are an error that lists them.
        """
        arguments, where = _arguments(data)
        try:
            return cls(**arguments)
        except HyperParametersError as error:
            raise _where_given(error, where) from None

    def to_dict(self) -> dict[str, Any]:
        """Plain data keyed by the field names, which :meth:`from_dict` reads back to an equal
        object. Tuples become lists; classes become their import paths."""
        return attrs.asdict(self, value_serializer=_serialize)

    def to_yaml(self, path: str | os.PathLike[str]) -> None:
        """Write a YAML file in accmt 1.x's layout (``hps:``, ``optimizer: {type: ...}``,
        ``scheduler: {type: ...}``), which :meth:`from_yaml` reads back to an equal object."""
        data = self.to_dict()
        for field in ("optimizer_kwargs", "scheduler_kwargs"):
            if "type" in data[field]:
                raise HyperParametersError(
                    f"{field}.type", "an argument named 'type' cannot be written in the hps: layout"
                )
        hps: dict[str, Any] = {
            "epochs": data["epochs"],
            "max_steps": data["max_steps"],
            "batch_size": data["batch_size"],
            "optimizer": {"type": data["optimizer"], **data["optimizer_kwargs"]},
        }
        if data["scheduler"] is not None:
            hps["scheduler"] = {"type": data["scheduler"], **data["scheduler_kwargs"]}
        hps["step_scheduler_per_epoch"] = data["step_scheduler_per_epoch"]
        try:
            text = yaml.safe_dump({"hps": hps}, sort_keys=False)
        except yaml.representer.RepresenterError as error:
            raise HyperParametersError(
                "to_yaml", f"a value cannot be written as YAML: {error.args[-1]!r}"
            ) from None
        Path(path).write_text(text, encoding="utf-8")

    def build_optimizer(self, parameters: Iterable[Any]) -> Optimizer:
        """The optimizer over ``parameters`` (tensors or parameter-group dicts)."""
        optimizer = _optimizer_class(self.optimizer)
        try:
            return optimizer(parameters, **self.optimizer_kwargs)
        except (TypeError, ValueError) as error:
            raise HyperParametersError(
                "optimizer_kwargs",
                f"{_describe(self.optimizer)} rejected {self.optimizer_kwargs!r}: {error}",
            ) from error

    def build_scheduler(
        self, optimizer: Optimizer, num_training_steps: int, num_epochs: int
    ) -> LRScheduler | None:
        """The scheduler over ``optimizer``, or None when there is none.

        ``num_training_steps`` is the number of times the scheduler will be stepped in the whole
        run (optimizer steps, or epochs when ``step_scheduler_per_epoch``); ``num_epochs`` is the
        number of epochs. Arguments that size the schedule and are not in ``scheduler_kwargs``
        are filled once from them: ``num_training_steps``, ``total_iters``, ``T_max`` and
        ``total_steps`` get ``num_training_steps``; OneCycleLR given ``epochs`` or
        ``steps_per_epoch`` gets the other. ``warmup_ratio`` becomes
        ``num_warmup_steps = round(warmup_ratio * num_training_steps)``.
        """
        _check_int("num_training_steps", num_training_steps, 1)
        _check_int("num_epochs", num_epochs, 1)
        if self.scheduler is None:
            return None
        factory = _scheduler_factory(self.scheduler)
        kwargs = _fill_from_the_run(
            self.scheduler_kwargs, _parameters(factory), num_training_steps, num_epochs
        )
        warmup = kwargs.get("num_warmup_steps")
        if isinstance(warmup, int) and warmup > num_training_steps:
            raise HyperParametersError(
                "scheduler_kwargs.num_warmup_steps",
                f"{warmup} warmup steps, but the scheduler is stepped only "
                f"{num_training_steps} times in this run",
            )
        try:
            return factory(optimizer, **kwargs)
        except (TypeError, ValueError) as error:
            raise HyperParametersError(
                "scheduler_kwargs", f"{_describe(self.scheduler)} rejected {kwargs!r}: {error}"
            ) from error


def _where_given(error: HyperParametersError, where: Mapping[str, str]) -> HyperParametersError:
    """``error`` with its key as the user wrote it (``where`` maps each field to that key)."""
    head = re.match(r"[A-Za-z_]*", error.key)
    name = head.group() if head else ""
    if name not in where:
        return error
    return HyperParametersError(where[name] + error.key[len(name) :], error.problem)


def _arguments(data: Any) -> tuple[dict[str, Any], dict[str, str]]:
    """The constructor arguments in ``data`` (flat or 1.x layout), and where each came from."""
    if not isinstance(data, Mapping):
        raise HyperParametersError(
            "hyperparameters", f"expected a mapping, got {type(data).__name__}"
        )
    prefix = ""
    if "hps" in data:
        others = [key for key in data if key != "hps"]
        if others:
            listed = ", ".join(map(repr, others))
            raise HyperParametersError(
                str(others[0]) if len(others) == 1 else "hyperparameters",
                f"unknown top-level {listed} next to 'hps' (hyperparameters go under hps:)",
            )
        data = {} if data["hps"] is None else data["hps"]
        prefix = "hps"
        if not isinstance(data, Mapping):
            raise HyperParametersError("hps", f"expected a mapping, got {type(data).__name__}")
    fields = [field.name for field in attrs.fields(HyperParameters)]
    arguments: dict[str, Any] = {}
    where: dict[str, str] = {}

    def put(field: str, value: Any, key: str) -> None:
        if field in arguments:
            raise HyperParametersError(
                _join(prefix, key), f"the {field} is given twice: here and as {where[field]!r}"
            )
        arguments[field] = value
        where[field] = _join(prefix, key)

    unknown = []
    for key, value in data.items():
        if key in ("optimizer", "optim", "scheduler") and isinstance(value, Mapping):
            field = "scheduler" if key == "scheduler" else "optimizer"
            block = dict(value)
            if "type" not in block:
                raise HyperParametersError(
                    _join(prefix, f"{key}.type"), f"missing: the {field}'s name or class"
                )
            put(field, block.pop("type"), f"{key}.type")
            put(f"{field}_kwargs", block, key)
        elif key == "optim":
            put("optimizer", value, key)
        elif key == "optim_kwargs":
            put("optimizer_kwargs", value, key)
        elif key in fields:
            put(key, value, key)
        else:
            unknown.append(key)
    if unknown:
        raise _unknown(prefix, unknown, fields, "HyperParameters", "key")
    return arguments, where
