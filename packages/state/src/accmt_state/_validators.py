"""The rules a TrainingState's fields obey, checked at assignment and at load.

A check is ``check(name, value)``: it raises a one-line StateTypeError (a TypeError) or
StateError (a ValueError) naming the field (and the key, inside a dict). :func:`rule` makes a
check an attrs validator.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from ._errors import StateError, StateTypeError
from ._migrations import SCHEMA_VERSION

Check = Callable[[str, Any], None]
Validator = Callable[[Any, "attrs.Attribute[Any]", Any], None]


def rule(check: Check) -> Validator:
    """The attrs validator that applies ``check`` to its field."""

    def validate(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
        check(attribute.name, value)

    return validate


def _type_error(name: str, expected: str, value: object) -> StateTypeError:
    return StateTypeError(f"{name} must be {expected}, got {type(value).__name__} {value!r}")


def whole_number(name: str, value: object) -> None:
    """An int that is not a bool."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise _type_error(name, "an int", value)


def count(name: str, value: object) -> None:
    """A counter: a whole number, never below zero."""
    whole_number(name, value)
    if isinstance(value, int) and value < 0:
        raise StateError(f"{name} must be >= 0, got {value}")


def boolean(name: str, value: object) -> None:
    """A bool, not a number standing in for one."""
    if not isinstance(value, bool):
        raise _type_error(name, "a bool", value)


def text(name: str, value: object) -> None:
    """A str."""
    if not isinstance(value, str):
        raise _type_error(name, "a str", value)


def floating(name: str, value: object) -> None:
    """A float (ints are converted before this runs, see :func:`as_float`)."""
    if not isinstance(value, float):
        raise _type_error(name, "a float", value)


def real_number(name: str, value: object) -> None:
    """A float or an int, not a bool."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _type_error(name, "a number", value)


def current_schema(name: str, value: object) -> None:
    """A state in memory is always of the current schema; older files are migrated on load."""
    if isinstance(value, bool) or value != SCHEMA_VERSION:
        raise StateError(f"{name} must be {SCHEMA_VERSION}, got {value!r}")


def optional(check: Check) -> Check:
    """None, or a value that passes ``check``."""

    def validate(name: str, value: object) -> None:
        if value is not None:
            check(name, value)

    return validate


def keyed_by_str(check: Check | None = None) -> Check:
    """A dict whose keys are strings and whose values pass ``check`` (any value if None)."""

    def validate(name: str, value: object) -> None:
        if not isinstance(value, dict):
            raise _type_error(name, "a dict", value)
        for key, item in value.items():
            if not isinstance(key, str):
                raise StateTypeError(f"{name} keys must be str, got {key!r}")
            if check is not None:
                check(f"{name}[{key!r}]", item)

    return validate


def as_float(value: Any) -> Any:
    """An attrs converter: an int becomes a float; anything else is left for the validator."""
    if isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value
