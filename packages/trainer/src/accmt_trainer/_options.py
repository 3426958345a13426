"""Checks on the Trainer's options, each failing with the option's name and the bad value."""

from __future__ import annotations

from typing import Any


class TrainerConfigError(ValueError):
    """An option of the Trainer, or of its run, is invalid. The message names it."""


def positive_int(name: str, value: Any, *, allow_none: bool = False) -> Any:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise TrainerConfigError(
            f"Trainer({name}=...): expected a whole number >= 1, got {value!r}"
        )
    return value


def clip_value(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise TrainerConfigError(
            f"Trainer(clip_grad=...): expected a positive number (the max gradient norm) or "
            f"None, got {value!r}"
        )
    return float(value)


def one_of(name: str, value: Any, choices: tuple[Any, ...]) -> Any:
    if value not in choices:
        raise TrainerConfigError(f"Trainer({name}=...): expected one of {choices}, got {value!r}")
    return value
