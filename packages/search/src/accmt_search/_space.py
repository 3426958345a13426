"""The search space: one format, read from a dict, a YAML file, or a ``space(trial)`` function.

A space maps parameter names to what each trial takes for them. The names are:

- any ``HyperParameters`` field (``epochs``, ``batch_size``, ``optimizer``, ...), and any
  argument of the optimizer or the scheduler as ``optimizer_kwargs.<name>`` /
  ``scheduler_kwargs.<name>``;
- any keyword argument of ``get_module_fn`` as ``module.<name>``.

A value is fixed, or searched: ``{type: float, low, high, log, step}``, ``{type: int, low, high,
step, log}`` or ``{type: categorical, choices}`` (a list, or a mapping from label to value).
What the space does not name is ``HyperParameters``' default.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import yaml

from accmt_trainer.integration import HyperParameters

from ._distributions import Choice, Distribution, Fixed, FloatRange, IntRange
from ._errors import SearchSpaceError
from ._specs import is_spec, parse_spec

if TYPE_CHECKING:
    import optuna

FIELDS = tuple(field.name for field in attrs.fields(HyperParameters))
PREFIXES = ("optimizer_kwargs", "scheduler_kwargs", "module")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


# Former names of parameters, with what to write instead (error messages only).
FORMER_NAMES = {
    "train_batch_size": "batch_size",
    "eval_batch_size": "batch_size: [train, evaluation]",
    "learning_rate": "optimizer_kwargs.lr",
    "beta1": "optimizer_kwargs.betas: [beta1, beta2]",
    "beta2": "optimizer_kwargs.betas: [beta1, beta2]",
    "eps": "optimizer_kwargs.eps",
    "weight_decay": "optimizer_kwargs.weight_decay",
    "warmup_ratio": "scheduler_kwargs.warmup_ratio",
}


SpaceFunction = Callable[["optuna.trial.BaseTrial"], Mapping[str, Any]]
"""``space(trial)``: suggests on the trial, returns ``{name: value}``."""
SpaceSource = Mapping[str, Any] | str | os.PathLike[str] | SpaceFunction
"""What ``set_space`` takes: a dict, a YAML path, or a space function."""


@attrs.frozen
class Assignment:
    """What one trial takes: a value per name."""

    values: dict[str, Any]


@attrs.frozen
class SearchSpace:
    """A parsed space: a distribution per name."""

    entries: dict[str, Distribution]
    file: str | None = None

    @classmethod
    def build(
        cls, given: Mapping[str, Any], file: str | os.PathLike[str] | None = None
    ) -> SearchSpace:
        """Parse ``given`` (name to value or spec)."""
        where = None if file is None else os.fspath(file)
        flat = _flatten(given, where)
        for name in flat:
            _check_name(name, where)
        return cls({name: _parse(name, value, where) for name, value in flat.items()}, where)

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
        return Assignment({name: entry.sample(trial, name) for name, entry in self.entries.items()})

    def probes(self) -> Iterator[Assignment]:
        """Assignments that stand for the space when it is checked before the first trial:
        every distribution at its first probe, then each probe of each in turn."""
        base = {name: entry.probes()[0] for name, entry in self.entries.items()}
        yield Assignment(base)
        for name, entry in self.entries.items():
            for value in entry.probes()[1:]:
                yield Assignment({**base, name: value})

    def error(self, key: str, problem: str) -> SearchSpaceError:
        return SearchSpaceError(key, problem, self.file)


@attrs.frozen
class FunctionSpace:
    """A ``space(trial)`` function: it suggests what it wants on the trial and returns the
    values by name, in the format above."""

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


def _flatten(given: Mapping[str, Any], file: str | None) -> dict[str, Any]:
    """``{"module": {"hidden": ...}}`` as ``{"module.hidden": ...}`` (also the two kwargs)."""
    if not isinstance(given, Mapping):
        raise SearchSpaceError("", f"expected a mapping of parameter names, got {given!r}", file)
    flat: dict[str, Any] = {}
    for key, value in given.items():
        if not isinstance(key, str):
            raise SearchSpaceError(str(key), "parameter names must be strings", file)
        if key in PREFIXES and isinstance(value, Mapping) and not is_spec(value):
            pairs = [(f"{key}.{inner}", item) for inner, item in value.items()]
        else:
            pairs = [(key, value)]
        for name, item in pairs:
            if name in flat:  # module: {hidden: ...} and module.hidden
                raise SearchSpaceError(name, "given twice; give one of them, not both", file)
            flat[name] = item
    return flat


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
    if name in FIELDS:
        return
    if name in FORMER_NAMES:
        raise SearchSpaceError(
            name,
            f"a former name: write {FORMER_NAMES[name]}. The accmt package's "
            "HyperParameterSearch.set_parameters (from accmt import HyperParameterSearch) still "
            "takes it.",
            file,
        )
    head, dot, tail = name.partition(".")
    if dot and head in PREFIXES and _IDENTIFIER.fullmatch(tail):
        return
    known = [*FIELDS, *(f"{prefix}.<name>" for prefix in PREFIXES)]
    close = difflib.get_close_matches(name, known, n=2)
    hint = f" (did you mean {' or '.join(map(repr, close))}?)" if close else ""
    raise SearchSpaceError(
        name,
        f"not a parameter{hint}; the names are HyperParameters fields ({', '.join(FIELDS)}), "
        "optimizer_kwargs.<name>, scheduler_kwargs.<name> and module.<name> (a keyword argument "
        "of get_module_fn)",
        file,
    )


# ------------------------------------------------------------------------------ parsing


def _parse(name: str, value: Any, file: str | None) -> Distribution:
    if isinstance(value, (Fixed, FloatRange, IntRange, Choice)):
        return value
    if is_spec(value):
        return parse_spec(name, value, file)
    return Fixed(value)


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
