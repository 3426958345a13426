"""The hyperparameters of a run: epochs, batch size, optimizer and scheduler.

Built from Python, from a dict (flat, or in the configuration file's ``hps:`` layout) or from a
YAML file in that layout. attrs converters and validators check every value when the object is
made, so a bad configuration fails where it is read, with the key that is wrong.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs
import yaml
from torch.optim import Optimizer
from torch.optim.lr_scheduler import LRScheduler

from .._errors import HyperParametersError
from ._arguments import check_arguments, check_int, fill_from_the_run, keyword_parameters
from ._config_layout import layout_arguments, where_given
from ._plain_values import as_lists, plain
from ._registry import describe, optimizer_class, registered_name, resolve, scheduler_factory


def _at_least_one(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    check_int(attribute.name, value, 1)


def _none_or_at_least_one(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None:
        check_int(attribute.name, value, 1)


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
        check_int("batch_size[0]", train, 1)
        check_int("batch_size[1]", val, 1)
        return (train, val)
    check_int("batch_size", value, 1)
    return value


def _to_optimizer(value: str | type[Optimizer]) -> str | type[Optimizer]:
    """A registered optimizer by its name (any case), or an Optimizer subclass; registered
    classes are kept by name."""
    resolved: str | type[Optimizer] = resolve(value, "optimizer", Optimizer)
    return resolved


def _to_scheduler(value: str | type[LRScheduler] | None) -> str | type[LRScheduler] | None:
    """A registered scheduler by its name (any case: torch.optim.lr_scheduler's classes and
    the warmup schedules), an LRScheduler subclass, or None. Registered classes are kept by
    name."""
    if value is None:
        return None
    resolved: str | type[LRScheduler] = resolve(value, "scheduler", LRScheduler)
    return resolved


def _to_kwargs(value: Mapping[str, Any] | None, field: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise HyperParametersError(field, f"expected a mapping of argument names, got {value!r}")
    for key in value:
        if not isinstance(key, str):
            raise HyperParametersError(field, f"argument names must be strings, got {key!r}")
    return {key: plain(item) for key, item in value.items()}


def _to_optimizer_kwargs(value: Mapping[str, Any] | None) -> dict[str, Any]:
    return _to_kwargs(value, "optimizer_kwargs")


def _to_scheduler_kwargs(value: Mapping[str, Any] | None) -> dict[str, Any]:
    """Also: a float ``num_warmup_steps`` in [0, 1] is a ratio of the training steps, kept as
    ``warmup_ratio``; a whole float (``1e3``) is an int."""
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
        check_int("scheduler_kwargs.num_warmup_steps", kwargs["num_warmup_steps"], 0)
    if "warmup_ratio" in kwargs:
        ratio = kwargs["warmup_ratio"]
        if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0 <= ratio <= 1:
            raise HyperParametersError(
                "scheduler_kwargs.warmup_ratio", f"expected a number in [0, 1], got {ratio!r}"
            )
        kwargs["warmup_ratio"] = float(ratio)
    if "num_training_steps" in kwargs:
        check_int("scheduler_kwargs.num_training_steps", kwargs["num_training_steps"], 1)
    return kwargs


def _serialize(instance: Any, field: attrs.Attribute[Any] | None, value: Any) -> Any:
    """``attrs.asdict`` hook: classes become their registered names, tuples become lists."""
    if field is not None and field.name in ("optimizer", "scheduler") and callable(value):
        # Written by its registered name, which from_dict reads back; an unregistered class is
        # written as its qualified name for people to read, and from_dict refuses it.
        return registered_name(value, field.name) or describe(value)
    return as_lists(value) if field is not None else value


@attrs.frozen
class HyperParameters:
    """What a run trains with, checked when it is made.

    - ``epochs``: passes over the training data, at least 1.
    - ``max_steps``: a cap on optimizer steps (at least 1), or None.
    - ``batch_size``: an int, or a ``(train, val)`` pair; each at least 1.
    - ``optimizer``: the name of a torch.optim optimizer (any case: ``"adamw"`` is kept as
      ``"AdamW"``), or an ``Optimizer`` subclass (a
      registered name in a configuration); ``optimizer_kwargs``
      are its arguments, such as ``{"lr": 1e-3}``.
    - ``scheduler``: None (constant learning rate), the name of a torch.optim.lr_scheduler class,
      one of the warmup schedules (``LinearWithWarmup``, ``CosineWithWarmup``, ``Constant``,
      ``ConstantWithWarmup``, ``CosineWithHardRestartsWithWarmup``, ``InverseSQRT``,
      ``PolynomialDecayWithWarmup``), or an ``LRScheduler`` subclass.
      ``scheduler_kwargs`` are its arguments; warmup is given as ``num_warmup_steps`` or as
      ``warmup_ratio``, a fraction of the training steps. The arguments that size a schedule to
      the run (``num_training_steps``, ``total_iters``, ``T_max``, ``total_steps``...) are
      filled by :meth:`build_scheduler` when not given.
    - ``step_scheduler_per_epoch``: step the scheduler once per epoch, not per optimizer step.

    In the kwargs, numeric strings (``"1e-6"``, as YAML reads it) become numbers and lists become
    tuples. Arguments that the optimizer or the scheduler does not take are an error, as is any
    bad value: :class:`HyperParametersError` names the key.
    """

    epochs: int = attrs.field(default=1, validator=_at_least_one)
    max_steps: int | None = attrs.field(default=None, validator=_none_or_at_least_one)
    batch_size: int | tuple[int, int] = attrs.field(default=1, converter=_to_batch_size)
    optimizer: str | type[Optimizer] = attrs.field(default="SGD", converter=_to_optimizer)
    optimizer_kwargs: dict[str, Any] = attrs.field(factory=dict, converter=_to_optimizer_kwargs)
    scheduler: str | type[LRScheduler] | None = attrs.field(default=None, converter=_to_scheduler)
    scheduler_kwargs: dict[str, Any] = attrs.field(factory=dict, converter=_to_scheduler_kwargs)
    step_scheduler_per_epoch: bool = attrs.field(default=False, validator=_is_bool)

    def __attrs_post_init__(self) -> None:
        check_arguments(
            "optimizer_kwargs",
            self.optimizer_kwargs,
            self.optimizer,
            optimizer_class(self.optimizer),
        )
        if self.scheduler is None:
            if self.scheduler_kwargs:
                raise HyperParametersError(
                    "scheduler_kwargs",
                    f"{', '.join(map(repr, self.scheduler_kwargs))} given, but no scheduler",
                )
            return
        check_arguments(
            "scheduler_kwargs",
            self.scheduler_kwargs,
            self.scheduler,
            scheduler_factory(self.scheduler),
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
        """Read a YAML file in the ``hps:`` layout that :meth:`to_yaml` writes (``optimizer:
        {type: ...}``), or with the field names at the top level. Errors name the key and the
        file."""
        with open(path, encoding="utf-8") as stream:
            data = yaml.safe_load(stream)
        try:
            return cls.from_dict({} if data is None else data)
        except HyperParametersError as error:
            raise HyperParametersError(error.key, f"{error.problem} (in {path})") from None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> HyperParameters:
        """Build from a dict with the field names, or in the ``hps:`` layout of the file::

            {"hps": {"epochs": 3, "batch_size": 32,
                     "optimizer": {"type": "AdamW", "lr": 1e-3},
                     "scheduler": {"type": "LinearWithWarmup", "warmup_ratio": 0.1}}}

        ``optim`` is read as ``optimizer`` and ``optim_kwargs`` as ``optimizer_kwargs`` (an
        older file's keys). Unknown keys are an error that lists them.
        """
        arguments, where = layout_arguments(data, _FIELDS)
        try:
            return cls(**arguments)
        except HyperParametersError as error:
            raise where_given(error, where) from None

    def to_dict(self) -> dict[str, Any]:
        """Plain data keyed by the field names, which :meth:`from_dict` reads back to an equal
        object. Tuples become lists; classes become their registered names."""
        return attrs.asdict(self, value_serializer=_serialize)

    def to_yaml(self, path: str | os.PathLike[str]) -> None:
        """Write a YAML file in the ``hps:`` layout (``optimizer: {type: ...}``,
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
        optimizer = optimizer_class(self.optimizer)
        try:
            return optimizer(parameters, **self.optimizer_kwargs)
        except (TypeError, ValueError) as error:
            raise HyperParametersError(
                "optimizer_kwargs",
                f"{describe(self.optimizer)} rejected {self.optimizer_kwargs!r}: {error}",
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
        check_int("num_training_steps", num_training_steps, 1)
        check_int("num_epochs", num_epochs, 1)
        if self.scheduler is None:
            return None
        factory = scheduler_factory(self.scheduler)
        kwargs = fill_from_the_run(
            self.scheduler_kwargs, keyword_parameters(factory), num_training_steps, num_epochs
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
                "scheduler_kwargs", f"{describe(self.scheduler)} rejected {kwargs!r}: {error}"
            ) from error


_FIELDS = [field.name for field in attrs.fields(HyperParameters)]
