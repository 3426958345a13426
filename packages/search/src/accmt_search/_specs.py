"""What one entry of a search space means: a fixed value, or a spec (``{type: float, low,
high, log, step}``, ``{type: int, low, high, step, log}``, ``{type: categorical, choices}``)
parsed into a distribution, with errors that name the entry and the file."""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping
from typing import Any

from ._distributions import LABEL_TYPES, Choice, Distribution, FloatRange, IntRange
from ._errors import SearchSpaceError

KINDS = {
    "float": ("low", "high", "log", "step"),
    "int": ("low", "high", "step", "log"),
    "categorical": ("choices",),
}


def is_spec(value: Any) -> bool:
    return isinstance(value, Mapping) and value.get("type") in KINDS


def parse_spec(name: str, spec: Mapping[str, Any], file: str | None) -> Distribution:
    kind = spec["type"]
    allowed = KINDS[kind]
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
        return choice(name, spec["choices"], file)
    if kind == "int":
        return int_range(name, spec, file)
    return float_range(name, spec, file)


def choice(name: str, choices: Any, file: str | None) -> Choice:
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


def int_range(name: str, spec: Mapping[str, Any], file: str | None) -> IntRange:
    low, high, step = spec["low"], spec["high"], spec.get("step", 1)
    for key, value in (("low", low), ("high", high), ("step", step)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise SearchSpaceError(name, f"an int range needs a whole {key}, got {value!r}", file)
    log = _flag(name, spec.get("log", False), file)
    _check_range(name, low, high, step, log, file)
    if log and step != 1:
        raise SearchSpaceError(name, "a log-scale int range takes no step", file)
    return IntRange(low, high, step, log)


def float_range(name: str, spec: Mapping[str, Any], file: str | None) -> FloatRange:
    low, high, step = spec["low"], spec["high"], spec.get("step")
    for key, value in (("low", low), ("high", high)):
        if not is_number(value):
            raise SearchSpaceError(
                name, f"a float range needs a number as {key}, got {value!r}", file
            )
    if step is not None and not is_number(step):
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


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
