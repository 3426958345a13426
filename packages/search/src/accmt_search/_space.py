"""The search space: one format, read from ``set_parameters``, a dict or YAML file, or a
``space(trial)`` function.

A space maps parameter names to what each trial takes for them. The names are:

- accmt 1.x's ``set_parameters`` names (``train_batch_size``, ``epochs``, ``max_steps``,
  ``learning_rate``, ``beta1``, ``beta2``, ``eps``, ``weight_decay``, ``scheduler``,
  ``warmup_ratio``, ``step_scheduler_per_epoch``, ``optimizer``, ``eval_batch_size``), each with
  its 1.x default when not given;
- any ``HyperParameters`` field (``batch_size``, ...), and any argument of the optimizer or the
  scheduler as ``optimizer_kwargs.<name>`` / ``scheduler_kwargs.<name>``;
- any keyword argument of ``get_module_fn`` as ``module.<name>``.

A value is fixed, or searched: ``{type: float, low, high, log, step}``, ``{type: int, low, high,
step, log}`` or ``{type: categorical, choices}`` (a list, or a mapping from label to value). The
1.x names also keep 1.x's shorthands: a list of two numbers is a range, a tuple is a choice, a
list of batch sizes is a choice, and a dict of schedulers is a choice between them.
"""

from __future__ import annotations

import difflib
import math
import os
import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import yaml

from accmt_trainer import HyperParameters

from ._distributions import LABEL_TYPES, Choice, Distribution, Fixed, FloatRange, IntRange
from ._errors import SearchSpaceError

if TYPE_CHECKING:
    import optuna

# accmt 1.x's set_parameters, with its defaults. 1.x's default learning-rate range was
# [1e-3, 1e-7], reversed; here it is valid and sampled on a log scale.
ONE_X_DEFAULTS: dict[str, Any] = {
    "train_batch_size": 1,
    "epochs": 1,
    "max_steps": None,
    "learning_rate": FloatRange(1e-7, 1e-3, log=True),
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

# The HyperParameters setting each 1.x name fills; a space that gives that setting by its own
# name replaces the 1.x default, and giving both is an error.
TARGETS: dict[str, str] = {
    "train_batch_size": "batch_size",
    "eval_batch_size": "batch_size",
    "learning_rate": "optimizer_kwargs.lr",
    "beta1": "optimizer_kwargs.betas",
    "beta2": "optimizer_kwargs.betas",
    "eps": "optimizer_kwargs.eps",
    "weight_decay": "optimizer_kwargs.weight_decay",
    "warmup_ratio": "scheduler_kwargs.warmup_ratio",
}

FIELDS = tuple(field.name for field in attrs.fields(HyperParameters))
PREFIXES = ("optimizer_kwargs", "scheduler_kwargs", "module")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
_INT_NAMES = ("epochs", "max_steps", "train_batch_size", "eval_batch_size")
_LOG_NAMES = ("learning_rate", "eps")
_KINDS = {
    "float": ("low", "high", "log", "step"),
    "int": ("low", "high", "step", "log"),
    "categorical": ("choices",),
}


SpaceFunction = Callable[["optuna.trial.BaseTrial"], Mapping[str, Any]]
"""``space(trial)``: suggests on the trial, returns ``{name: value}``."""
SpaceSource = Mapping[str, Any] | str | os.PathLike[str] | SpaceFunction
"""What ``set_space`` takes: a dict, a YAML path, or a space function."""


@attrs.frozen
class Assignment:
    """What one trial takes: a value per name, and which names the user gave (the others are
    1.x defaults, dropped where the chosen optimizer or scheduler does not take them)."""

    values: dict[str, Any]
    explicit: frozenset[str]


@attrs.frozen
class SearchSpace:
    """A parsed space: a distribution per name, 1.x defaults included."""

    entries: dict[str, Distribution]
    explicit: frozenset[str]
    file: str | None = None

    @classmethod
    def build(
        cls, given: Mapping[str, Any], file: str | os.PathLike[str] | None = None
    ) -> SearchSpace:
        """Parse ``given`` (name to value or spec) and add the 1.x defaults it does not replace."""
        where = None if file is None else os.fspath(file)
        flat = _flatten(given, where)
        for name in flat:
            _check_name(name, where)
        entries = {name: _parse(name, value, where) for name, value in flat.items()}
        _check_conflicts(entries, where)
        # A setting given by its own name (batch_size, optimizer_kwargs.lr) replaces the 1.x
        # defaults that fill it.
        replaced = {name for name in entries if name not in ONE_X_DEFAULTS}
        for name, default in ONE_X_DEFAULTS.items():
            if name not in entries and TARGETS.get(name, name) not in replaced:
                entries[name] = default if isinstance(default, FloatRange) else Fixed(default)
        return cls(entries, frozenset(flat), where)

    @classmethod
    def from_yaml(cls, path: str | os.PathLike[str]) -> SearchSpace:
        """Read the ``search:`` section of a YAML file. Errors name the key and the file."""
        try:
            with open(path, encoding="utf-8") as stream:
                data = yaml.safe_load(stream)
        except yaml.YAMLError as error:
            raise SearchSpaceError("", f"not valid YAML: {error}", path) from None
        if not isinstance(data, Mapping) or not isinstance(data.get("search"), Mapping):
            raise SearchSpaceError("", "expected a mapping under a top-level 'search:' key", path)
        return cls.build(_numbers(data["search"]), path)

    @property
    def searched(self) -> list[str]:
        """The names that vary between trials."""
        return [name for name, entry in self.entries.items() if entry.searched]

    def sample(self, trial: optuna.trial.BaseTrial) -> Assignment:
        """Draw every value from ``trial`` (fixed ones as they are)."""
        values = {name: entry.sample(trial, name) for name, entry in self.entries.items()}
        return Assignment(values, self.explicit)

    def probes(self) -> Iterator[Assignment]:
        """Assignments that stand for the space when it is checked before the first trial:
        every distribution at its first probe, then each probe of each in turn."""
        base = {name: entry.probes()[0] for name, entry in self.entries.items()}
        yield Assignment(base, self.explicit)
        for name, entry in self.entries.items():
            for value in entry.probes()[1:]:
                yield Assignment({**base, name: value}, self.explicit)

    def error(self, key: str, problem: str) -> SearchSpaceError:
        return SearchSpaceError(key, problem, self.file)


@attrs.frozen
class FunctionSpace:
    """A ``space(trial)`` function: it suggests what it wants on the trial and returns the
    values by name, in the format above; 1.x defaults fill the rest."""

    function: SpaceFunction

    def sample(self, trial: optuna.trial.BaseTrial) -> Assignment:
        returned = self.function(trial)
        if not isinstance(returned, Mapping):
            raise SearchSpaceError(
                "space", f"space(trial) must return a mapping of name to value, got {returned!r}"
            )
        space = SearchSpace.build({name: Fixed(value) for name, value in returned.items()})
        return space.sample(trial)


Space = SearchSpace | FunctionSpace


def from_parameters(given: Mapping[str, Any]) -> SearchSpace:
    """The space of ``set_parameters``: only the arguments that differ from 1.x's defaults
    count as given (so a default that the optimizer does not take is dropped, as in 1.x)."""
    changed = {
        name: value
        for name, value in given.items()
        if not (name in ONE_X_DEFAULTS and _same(value, ONE_X_DEFAULTS[name]))
        and not (name == "learning_rate" and value is None)
    }
    return SearchSpace.build(changed)


def _same(value: Any, default: Any) -> bool:
    return type(value) is type(default) and bool(value == default)


def _flatten(given: Mapping[str, Any], file: str | None) -> dict[str, Any]:
    """``{"module": {"hidden": ...}}`` as ``{"module.hidden": ...}`` (also the two kwargs)."""
    if not isinstance(given, Mapping):
        raise SearchSpaceError("", f"expected a mapping of parameter names, got {given!r}", file)
    flat: dict[str, Any] = {}
    for key, value in given.items():
        if not isinstance(key, str):
            raise SearchSpaceError(str(key), "parameter names must be strings", file)
        if key in PREFIXES and isinstance(value, Mapping) and not _is_spec(value):
            for inner, item in value.items():
                flat[f"{key}.{inner}"] = item
        else:
            flat[key] = value
    return flat


def _is_spec(value: Any) -> bool:
    return isinstance(value, Mapping) and value.get("type") in _KINDS


def _numbers(value: Any) -> Any:
    """Numeric strings as numbers: YAML reads ``1e-4`` (no dot) as a string."""
    if isinstance(value, str) and _NUMBER.fullmatch(value.strip()):
        number = float(value)
        return int(number) if re.fullmatch(r"[+-]?\d+", value.strip()) else number
    if isinstance(value, list):
        return [_numbers(item) for item in value]
    if isinstance(value, Mapping):
        return {key: _numbers(item) for key, item in value.items()}
    return value


def _check_name(name: str, file: str | None) -> None:
    if name in ONE_X_DEFAULTS or name in FIELDS:
        return
    head, dot, tail = name.partition(".")
    if dot and head in PREFIXES and _IDENTIFIER.fullmatch(tail):
        return
    known = [*ONE_X_DEFAULTS, *FIELDS, *(f"{prefix}.<name>" for prefix in PREFIXES)]
    close = difflib.get_close_matches(name, known, n=2)
    hint = f" (did you mean {' or '.join(map(repr, close))}?)" if close else ""
    raise SearchSpaceError(
        name,
        f"not a parameter{hint}; the names are set_parameters' ({', '.join(ONE_X_DEFAULTS)}), "
        f"HyperParameters fields ({', '.join(FIELDS)}), optimizer_kwargs.<name>, "
        "scheduler_kwargs.<name> and module.<name> (a keyword argument of get_module_fn)",
        file,
    )


def _check_conflicts(entries: Mapping[str, Distribution], file: str | None) -> None:
    for name, target in TARGETS.items():
        if name in entries and target in entries:
            raise SearchSpaceError(
                target, f"sets what {name!r} sets; give one of them, not both", file
            )


# ------------------------------------------------------------------------------ parsing


def _parse(name: str, value: Any, file: str | None) -> Distribution:
    if isinstance(value, (Fixed, FloatRange, IntRange, Choice)):
        parsed: Distribution = value
    elif _is_spec(value):
        parsed = _parse_spec(name, value, file)
    elif name in ONE_X_DEFAULTS:
        parsed = _parse_one_x(name, value, file)
    else:
        parsed = Fixed(value)
    _check_bounds(name, parsed, file)
    return parsed


def _parse_one_x(name: str, value: Any, file: str | None) -> Distribution:
    """accmt 1.x's shorthands: list = range (a choice for batch sizes), tuple = choice, a dict of
    schedulers = a choice between them."""
    if name == "scheduler" and isinstance(value, Mapping):
        return _choice(name, value, file)
    if isinstance(value, tuple) or (isinstance(value, list) and name.endswith("batch_size")):
        return _choice(name, value, file)
    if not isinstance(value, list):
        return Fixed(value)
    if len(value) != 2 or not all(_is_number(item) for item in value):
        raise SearchSpaceError(
            name,
            f"a range is a list of two numbers [low, high], got {value!r} (a tuple is a choice)",
            file,
        )
    low, high = value
    if name in _INT_NAMES:
        return _int_range(name, {"low": low, "high": high}, file)
    return _float_range(name, {"low": low, "high": high, "log": name in _LOG_NAMES}, file)


def _parse_spec(name: str, spec: Mapping[str, Any], file: str | None) -> Distribution:
    kind = spec["type"]
    allowed = _KINDS[kind]
    unknown = [key for key in spec if key != "type" and key not in allowed]
    if unknown:
        close = difflib.get_close_matches(str(unknown[0]), allowed, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise SearchSpaceError(
            name, f"a {kind} parameter takes {', '.join(allowed)}; not {unknown[0]!r}{hint}", file
        )
    required = ("choices",) if kind == "categorical" else ("low", "high")
    missing = [key for key in required if key not in spec]
    if missing:
        raise SearchSpaceError(name, f"a {kind} parameter needs {' and '.join(missing)}", file)
    if kind == "categorical":
        return _choice(name, spec["choices"], file)
    if kind == "int":
        return _int_range(name, spec, file)
    return _float_range(name, spec, file)


def _choice(name: str, choices: Any, file: str | None) -> Choice:
    if isinstance(choices, Mapping):
        labels: list[Any] = list(choices)
        if not all(isinstance(label, str) for label in labels):
            raise SearchSpaceError(name, "the labels of a choice must be strings", file)
    elif isinstance(choices, (list, tuple)):
        labels = list(choices)
        strange = [item for item in labels if not isinstance(item, LABEL_TYPES)]
        if strange:
            raise SearchSpaceError(
                name,
                f"optuna stores choices that are None, bool, int, float or str; give "
                f"{strange[0]!r} a label: choices as a mapping {{label: value}}",
                file,
            )
    else:
        raise SearchSpaceError(
            name, f"choices must be a list or a mapping of label to value, got {choices!r}", file
        )
    if not labels:
        raise SearchSpaceError(name, "a choice needs at least one option", file)
    if len(set(map(repr, labels))) != len(labels):
        raise SearchSpaceError(name, f"the choices repeat an option: {labels!r}", file)
    return Choice.of(choices)


def _int_range(name: str, spec: Mapping[str, Any], file: str | None) -> IntRange:
    low, high, step = spec["low"], spec["high"], spec.get("step", 1)
    for key, value in (("low", low), ("high", high), ("step", step)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise SearchSpaceError(name, f"an int range needs a whole {key}, got {value!r}", file)
    log = _flag(name, spec.get("log", False), file)
    _check_range(name, low, high, step, log, file)
    if log and step != 1:
        raise SearchSpaceError(name, "a log-scale int range takes no step", file)
    return IntRange(low, high, step, log)


def _float_range(name: str, spec: Mapping[str, Any], file: str | None) -> FloatRange:
    low, high, step = spec["low"], spec["high"], spec.get("step")
    for key, value in (("low", low), ("high", high)):
        if not _is_number(value):
            raise SearchSpaceError(
                name, f"a float range needs a number as {key}, got {value!r}", file
            )
    if step is not None and not _is_number(step):
        raise SearchSpaceError(name, f"step must be a number, got {step!r}", file)
    log = _flag(name, spec.get("log", False), file)
    _check_range(name, low, high, step, log, file)
    if log and step is not None:
        raise SearchSpaceError(name, "a log-scale range takes no step", file)
    return FloatRange(float(low), float(high), log, None if step is None else float(step))


def _check_range(
    name: str, low: float, high: float, step: float | None, log: bool, file: str | None
) -> None:
    if not (math.isfinite(low) and math.isfinite(high)):
        raise SearchSpaceError(name, f"the ends must be finite, got [{low}, {high}]", file)
    if not low < high:
        raise SearchSpaceError(name, f"low must be below high, got [{low}, {high}]", file)
    if log and low <= 0:
        raise SearchSpaceError(
            name, f"a log-scale range must be positive, got [{low}, {high}]", file
        )
    if step is not None and not step > 0:
        raise SearchSpaceError(name, f"step must be positive, got {step}", file)


def _flag(name: str, value: Any, file: str | None) -> bool:
    if not isinstance(value, bool):
        raise SearchSpaceError(name, f"log must be true or false, got {value!r}", file)
    return value


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# ----------------------------------------------------------------- the 1.x names' bounds

# What each 1.x name accepts, checked on a range's ends and on every choice.
_BOUNDS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "train_batch_size": (lambda v: _whole(v) and v >= 1, "a whole number >= 1"),
    "eval_batch_size": (lambda v: v is None or (_whole(v) and v >= 1), "a whole number >= 1"),
    "epochs": (lambda v: _whole(v) and v >= 1, "a whole number >= 1"),
    "max_steps": (lambda v: v is None or (_whole(v) and v >= 1), "None or a whole number >= 1"),
    "learning_rate": (lambda v: _is_number(v) and v > 0, "a positive number"),
    "eps": (lambda v: _is_number(v) and v > 0, "a positive number"),
    "beta1": (lambda v: _is_number(v) and 0 <= v < 1, "a number in [0, 1)"),
    "beta2": (lambda v: _is_number(v) and 0 <= v < 1, "a number in [0, 1)"),
    "weight_decay": (lambda v: _is_number(v) and v >= 0, "a number >= 0"),
    "warmup_ratio": (lambda v: _is_number(v) and 0 <= v <= 1, "a number in [0, 1]"),
    "step_scheduler_per_epoch": (lambda v: isinstance(v, bool), "true or false"),
}


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_bounds(name: str, parsed: Distribution, file: str | None) -> None:
    rule = _BOUNDS.get(name)
    if rule is None:
        return
    accepts, expected = rule
    for value in parsed.probes():
        if not accepts(value):
            raise SearchSpaceError(name, f"must be {expected}, got {value!r}", file)


def read_space(space: SpaceSource) -> Space:
    """A space from a dict, a YAML path or a ``space(trial)`` function."""
    if isinstance(space, (str, os.PathLike)):
        if not Path(space).is_file():
            raise SearchSpaceError("", "no such file", space)
        return SearchSpace.from_yaml(space)
    if isinstance(space, Mapping):
        return SearchSpace.build(space)
    if callable(space):
        return FunctionSpace(space)
    raise SearchSpaceError(
        "", f"expected a dict, a YAML path or a function space(trial), got {type(space).__name__}"
    )
