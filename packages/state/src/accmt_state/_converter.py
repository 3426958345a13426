"""The cattrs converter that turns data into strict JSON values and back.

Strict JSON has no infinities or NaN, so the converter writes a non-finite float as the
one-key object ``{"$numberDouble": "Infinity"}`` (or ``"-Infinity"``, ``"NaN"``), the form
MongoDB's Extended JSON uses, and reads it back as a float. Numpy and torch scalars (anything
with an ``.item()`` method) become plain Python numbers by duck typing, so neither is imported.
Structuring is strict: a bool is not an int, a string is not a number, an unknown key is an error.
"""

from __future__ import annotations

import math
import reprlib
from typing import Any

import attrs
import cattrs

from ._errors import StateTypeError

NONFINITE_KEY = "$numberDouble"
_NONFINITE = {"Infinity": math.inf, "-Infinity": -math.inf, "NaN": math.nan}
_JSON_KINDS = {
    bool: "a boolean",
    int: "an integer",
    float: "a number",
    str: "a string",
    list: "an array",
    dict: "an object",
    type(None): "null",
}

converter = cattrs.Converter(forbid_extra_keys=True)
"""The package's converter: ``converter.unstructure(x)`` is JSON-ready, ``converter.structure``
checks types strictly. Use it for your own attrs classes and plain data that go into JSON files."""


def encode_float(value: float) -> float | dict[str, str]:
    """A float as a strict JSON value: finite ones as themselves, others as a tagged object."""
    number = float(value)
    if math.isfinite(number):
        return number
    if math.isnan(number):
        return {NONFINITE_KEY: "NaN"}
    return {NONFINITE_KEY: "Infinity" if number > 0 else "-Infinity"}


def decode_nonfinite(obj: dict[str, Any]) -> Any:
    """The float a tagged object stands for, or the object unchanged (a ``json`` object_hook)."""
    if len(obj) == 1:
        tag = obj.get(NONFINITE_KEY)
        if isinstance(tag, str) and tag in _NONFINITE:
            return _NONFINITE[tag]
    return obj


def describe(value: object) -> str:
    """How an error message names a value: its JSON kind and a short repr."""
    kind = _JSON_KINDS.get(type(value), f"a {type(value).__name__}")
    return f"{kind} ({reprlib.repr(value)})"


def _expect(value: Any, kind: type | tuple[type, ...], expected: str) -> None:
    # To Python a bool is an int; in a state file it is never a number, nor a number a bool.
    wrong_bool = isinstance(value, bool) != (kind is bool)
    if wrong_bool or not isinstance(value, kind):
        raise StateTypeError(f"expected {expected}, got {describe(value)}")


def _structure_int(value: Any, _: type) -> int:
    _expect(value, int, "an integer")
    return int(value)


def _structure_float(value: Any, _: type) -> float:
    if isinstance(value, dict):
        value = decode_nonfinite(value)
    _expect(value, (int, float), "a number")
    return float(value)


def _structure_bool(value: Any, _: type) -> bool:
    _expect(value, bool, "a boolean")
    return bool(value)


def _structure_str(value: Any, _: type) -> str:
    _expect(value, str, "a string")
    return str(value)


def _structure_any(value: Any, _: Any) -> Any:
    """Untyped data as it came, with tagged non-finite floats turned back into floats."""
    if isinstance(value, dict):
        return decode_nonfinite({key: _structure_any(item, Any) for key, item in value.items()})
    if isinstance(value, list):
        return [_structure_any(item, Any) for item in value]
    return value


def _is_scalar_like(cls: Any) -> bool:
    """Numpy scalars and arrays, torch tensors: types with ``.item()`` that cattrs does not know."""
    return isinstance(cls, type) and callable(getattr(cls, "item", None)) and not attrs.has(cls)


converter.register_structure_hook(int, _structure_int)
converter.register_structure_hook(float, _structure_float)
converter.register_structure_hook(bool, _structure_bool)
converter.register_structure_hook(str, _structure_str)
converter.register_structure_hook_func(lambda cls: cls is Any, _structure_any)
converter.register_unstructure_hook(float, encode_float)
converter.register_unstructure_hook_func(
    _is_scalar_like, lambda value: converter.unstructure(value.item())
)
