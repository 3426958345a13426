"""accmt 1.x's ``set_parameters`` space, compiled into accmt-search's: a function of the optuna
trial that suggests each 1.x name and returns the HyperParameters settings it makes.

The 1.x names (``train_batch_size``, ``learning_rate``, ``beta1``, ...) keep 1.x's defaults and
shorthands: a single value is fixed, a list of two numbers is a range (int for ``epochs`` and
``max_steps``; float otherwise, on a log scale for ``learning_rate`` and ``eps``), a tuple is a
choice, a list of batch sizes is a choice, and a dict of schedulers is a choice between them.
A 1.x default that the chosen optimizer or scheduler does not take (``betas`` for SGD, a warmup
for a scheduler without one) is dropped; one the user gave is an error. Errors are
:class:`accmt_search.SearchSpaceError` naming the 1.x parameter.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import attrs
import optuna

from accmt_search import SearchSpaceError
from accmt_trainer import HyperParameters, HyperParametersError


@attrs.frozen
class Fixed:
    value: Any

    def draw(self, trial: optuna.trial.BaseTrial, name: str) -> Any:
        return self.value

    def probes(self) -> tuple[Any, ...]:
        return (self.value,)


@attrs.frozen
class Range:
    low: float
    high: float
    whole: bool = False
    log: bool = False

    def draw(self, trial: optuna.trial.BaseTrial, name: str) -> Any:
        if self.whole:
            return trial.suggest_int(name, int(self.low), int(self.high), log=self.log)
        return trial.suggest_float(name, self.low, self.high, log=self.log)

    def probes(self) -> tuple[Any, ...]:
        return (self.low, self.high)


@attrs.frozen
class Choice:
    labels: tuple[Any, ...]
    values: tuple[Any, ...]

    def draw(self, trial: optuna.trial.BaseTrial, name: str) -> Any:
        label = trial.suggest_categorical(name, list(self.labels))
        return self.values[self.labels.index(label)]

    def probes(self) -> tuple[Any, ...]:
        return self.values


Entry = Fixed | Range | Choice

# accmt 1.x's set_parameters, with its defaults. 1.x's default learning-rate range was
# [1e-3, 1e-7], reversed; here it is valid and sampled on a log scale.
DEFAULTS: dict[str, Any] = {
    "train_batch_size": 1,
    "epochs": 1,
    "max_steps": None,
    "learning_rate": Range(1e-7, 1e-3, log=True),
    "beta1": 0.9,
    "beta2": 0.999,
    "eps": 1e-8,
    "weight_decay": 0.01,
    "scheduler": None,
    "warmup_ratio": 0.1,
    "step_scheduler_per_epoch": False,
    "optimizer": "AdamW",
    "eval_batch_size": None,
}

# The optimizer or scheduler argument each 1.x name sets (beta1 and beta2 set betas together).
_ARGUMENTS = {
    "learning_rate": ("optimizer", "lr"),
    "eps": ("optimizer", "eps"),
    "weight_decay": ("optimizer", "weight_decay"),
    "beta1": ("optimizer", "betas"),
    "warmup_ratio": ("scheduler", "warmup_ratio"),
}
_FIELDS = ("epochs", "max_steps", "optimizer", "scheduler", "step_scheduler_per_epoch")
_INT_NAMES = ("epochs", "max_steps", "train_batch_size", "eval_batch_size")
_LOG_NAMES = ("learning_rate", "eps")
_LABEL_TYPES = (type(None), bool, int, float, str)


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# What each 1.x name accepts, checked on a range's ends and on every choice.
_BOUNDS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "train_batch_size": (lambda v: _whole(v) and v >= 1, "a whole number >= 1"),
    "eval_batch_size": (lambda v: v is None or (_whole(v) and v >= 1), "a whole number >= 1"),
    "epochs": (lambda v: _whole(v) and v >= 1, "a whole number >= 1"),
    "max_steps": (lambda v: v is None or (_whole(v) and v >= 1), "None or a whole number >= 1"),
    "learning_rate": (lambda v: _number(v) and v > 0, "a positive number"),
    "eps": (lambda v: _number(v) and v > 0, "a positive number"),
    "beta1": (lambda v: _number(v) and 0 <= v < 1, "a number in [0, 1)"),
    "beta2": (lambda v: _number(v) and 0 <= v < 1, "a number in [0, 1)"),
    "weight_decay": (lambda v: _number(v) and v >= 0, "a number >= 0"),
    "warmup_ratio": (lambda v: _number(v) and 0 <= v <= 1, "a number in [0, 1]"),
    "step_scheduler_per_epoch": (lambda v: isinstance(v, bool), "true or false"),
}


def parse(name: str, value: Any) -> Entry:
    """One 1.x value: fixed, a range or a choice; checked against what the name accepts."""
    entry = _shorthand(name, value)
    accepts, expected = _BOUNDS.get(name, (lambda v: True, ""))
    for probe in entry.probes():
        if not accepts(probe):
            raise SearchSpaceError(name, f"must be {expected}, got {probe!r}")
    return entry


def _shorthand(name: str, value: Any) -> Entry:
    if isinstance(value, (Fixed, Range, Choice)):
        return value
    if name == "scheduler" and isinstance(value, Mapping):
        if not all(isinstance(label, str) for label in value):
            raise SearchSpaceError(name, "the labels of a choice must be strings")
        return _choice(name, tuple(value), tuple(value.values()))
    if isinstance(value, tuple) or (isinstance(value, list) and name.endswith("batch_size")):
        strange = [item for item in value if not isinstance(item, _LABEL_TYPES)]
        if strange:
            problem = "optuna stores choices that are None, bool, int, float or str"
            raise SearchSpaceError(name, f"{problem}, not {strange[0]!r}")
        return _choice(name, tuple(value), tuple(value))
    if not isinstance(value, list):
        return Fixed(value)
    if len(value) != 2 or not all(map(_number, value)):
        problem = f"a range is a list of two numbers [low, high], got {value!r}"
        raise SearchSpaceError(name, f"{problem} (a tuple is a choice)")
    low, high = value
    whole = name in _INT_NAMES
    if whole and not (_whole(low) and _whole(high)):
        raise SearchSpaceError(name, f"an int range needs whole ends, got {value!r}")
    if not (math.isfinite(low) and math.isfinite(high)):
        raise SearchSpaceError(name, f"the ends must be finite, got {value!r}")
    if not low < high:
        raise SearchSpaceError(name, f"low must be below high, got [{low}, {high}]")
    log = name in _LOG_NAMES
    if log and low <= 0:
        raise SearchSpaceError(name, f"a log-scale range must be positive, got [{low}, {high}]")
    return Range(low, high, whole, log)


def _choice(name: str, labels: tuple[Any, ...], values: tuple[Any, ...]) -> Choice:
    if not labels:
        raise SearchSpaceError(name, "a choice needs at least one option")
    if len(set(map(repr, labels))) != len(labels):
        raise SearchSpaceError(name, f"the choices repeat an option: {list(labels)!r}")
    return Choice(labels, values)


@attrs.frozen
class ParametersSpace:
    """``set_parameters``' space as accmt-search takes it: called with the optuna trial, it
    suggests each searched 1.x name and returns the HyperParameters settings (``batch_size``,
    ``optimizer_kwargs.lr``, ...). ``given`` are the names the user set; the others are 1.x
    defaults, dropped where the chosen optimizer or scheduler does not take them."""

    entries: dict[str, Entry]
    given: frozenset[str]

    @classmethod
    def of(cls, arguments: Mapping[str, Any]) -> ParametersSpace:
        """The space of ``set_parameters(**arguments)`` (the names not in ``arguments`` at their
        defaults), checked: every choice and both ends of every range make a valid
        HyperParameters. Only the arguments that differ from 1.x's defaults count as given."""
        given = {
            name: value
            for name, value in arguments.items()
            if not _same(value, DEFAULTS[name]) and not (name == "learning_rate" and value is None)
        }
        entries = {name: parse(name, given.get(name, DEFAULTS[name])) for name in DEFAULTS}
        if not any(isinstance(entry, (Range, Choice)) for entry in entries.values()):
            raise SearchSpaceError(
                "", "no parameter is searched: give at least one a range or a choice"
            )
        space = cls(entries, frozenset(given))
        for values in space.probes():
            space.hyperparameters(values)
        return space

    def __call__(self, trial: optuna.trial.BaseTrial) -> dict[str, Any]:
        values = self.draw(trial)
        self.hyperparameters(values)  # errors name the 1.x parameter
        return self.settings(values)

    def draw(self, trial: optuna.trial.BaseTrial) -> dict[str, Any]:
        """A value per 1.x name, the searched ones suggested on ``trial`` under that name."""
        return {name: entry.draw(trial, name) for name, entry in self.entries.items()}

    def probes(self) -> Iterator[dict[str, Any]]:
        """Values that stand for the space: every entry at its first probe, then each probe of
        each in turn."""
        base = {name: entry.probes()[0] for name, entry in self.entries.items()}
        yield base
        for name, entry in self.entries.items():
            for value in entry.probes()[1:]:
                yield {**base, name: value}

    def settings(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """The HyperParameters settings of one draw of the 1.x names."""
        settings = {name: values[name] for name in _FIELDS}
        train, evaluation = values["train_batch_size"], values["eval_batch_size"]
        settings["batch_size"] = (train, train if evaluation is None else evaluation)
        for name, (owner, argument) in _ARGUMENTS.items():
            given = name in self.given or (name == "beta1" and "beta2" in self.given)
            if given or _takes(owner, values[owner], argument):
                value = (values["beta1"], values["beta2"]) if name == "beta1" else values[name]
                settings[f"{owner}_kwargs.{argument}"] = value
        return settings

    def hyperparameters(self, values: Mapping[str, Any]) -> HyperParameters:
        """The HyperParameters of one draw; a :class:`SearchSpaceError` names the 1.x
        parameter that makes it invalid."""
        fields: dict[str, Any] = {"optimizer_kwargs": {}, "scheduler_kwargs": {}}
        for key, value in self.settings(values).items():
            head, _, tail = key.partition(".")
            if tail:
                fields[head][tail] = value
            else:
                fields[key] = value
        try:
            return HyperParameters(**fields)
        except HyperParametersError as error:
            raise SearchSpaceError(self._name_of(error.key), error.problem) from None

    def _name_of(self, key: str) -> str:
        """The 1.x name for a HyperParameters error key (``optimizer_kwargs.lr`` came from
        ``learning_rate``; an error about all of a scheduler's arguments is the scheduler's)."""
        if key in ("optimizer_kwargs", "scheduler_kwargs"):
            return key.removesuffix("_kwargs")
        if key.startswith("batch_size"):
            return "eval_batch_size" if key.startswith("batch_size[1]") else "train_batch_size"
        for name, (owner, argument) in _ARGUMENTS.items():
            setting = f"{owner}_kwargs.{argument}"
            if key == setting or key.startswith(f"{setting}."):
                if name == "beta1" and "beta1" not in self.given:
                    return "beta2"
                return name
        return key


def _same(value: Any, default: Any) -> bool:
    return type(value) is type(default) and bool(value == default)


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
