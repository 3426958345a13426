"""Plain values in a configuration: numeric strings as numbers, lists as tuples, and back."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_INT = re.compile(r"[+-]?\d+")
_FLOAT = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def plain(value: Any) -> Any:
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
        return tuple(plain(item) for item in value)
    if isinstance(value, Mapping):
        return {key: plain(item) for key, item in value.items()}
    return value


def as_lists(value: Any) -> Any:
    """``value`` with its tuples, at any depth, as lists (the reverse of :func:`_plain`)."""
    if isinstance(value, (list, tuple)):
        return [as_lists(item) for item in value]
    if isinstance(value, Mapping):
        return {key: as_lists(item) for key, item in value.items()}
    return value
