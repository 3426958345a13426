"""Checks on the Trainer's options, each failing with the option's name and the bad value."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs
from accelerate.utils import convert_file_size_to_int

from .._errors import TrainerConfigError

Validator = Callable[[Any, "attrs.Attribute[Any]", Any], None]


def option(check: Callable[..., Any], *args: Any, **kwargs: Any) -> Validator:
    """The attrs validator that runs ``check(field name, value, *args, **kwargs)``: an options
    class names its fields as the Trainer's keywords, so the error names the keyword."""

    def validate(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        check(attribute.name, value, *args, **kwargs)

    return validate


def options_of(record: type[Any], given: Mapping[str, Any]) -> Any:
    """The options record ``record`` made from the values ``given`` by keyword: each record
    declares its options as fields named like the Trainer's keywords, and takes those."""
    return record(**{field.name: given[field.name] for field in attrs.fields(record) if field.init})


def check_mapping(option: str, value: Any, *, where: str | None = None) -> dict[str, Any]:
    """An option that is a dict with string keys, or None (an empty dict). ``where`` names
    it in the error (default: ``Trainer(option=...)``)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(key, str) for key in value):
        raise TrainerConfigError(
            f"{where or f'Trainer({option}=...)'}: {option} must be a dict with string keys, got "
            f"{type(value).__name__} {value!r}"
        )
    return dict(value)


def positive_int(name: str, value: Any, *, allow_none: bool = False) -> Any:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise TrainerConfigError(
            f"Trainer({name}=...): expected a whole number >= 1, got {value!r}"
        )
    return value


def log_every_value(value: Any) -> Any:
    """``log_every``: a whole number of optimizer steps, or ``"epoch"``."""
    if value == "epoch":
        return value
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise TrainerConfigError(
            f"Trainer(log_every=...): expected a whole number >= 1 or 'epoch', got {value!r}"
        )
    return value


def profile_window(value: Any) -> tuple[int, int] | None:
    """``profile_steps``: ``(start, stop)``, global steps with ``0 <= start < stop`` (the
    optimizer steps ``start + 1`` to ``stop`` are profiled), or None."""
    if value is None:
        return None
    whole = (
        [isinstance(v, int) and not isinstance(v, bool) for v in value]
        if isinstance(value, (tuple, list))
        else []
    )
    if len(whole) != 2 or not all(whole):
        problem = "expected a pair (start, stop) of whole numbers of optimizer steps, or None"
    elif value[0] < 0:
        problem = "start must be 0 or more (0 profiles from the first optimizer step)"
    elif value[0] >= value[1]:
        problem = "start must be below stop (it profiles the optimizer steps start+1 to stop)"
    else:
        return (value[0], value[1])
    raise TrainerConfigError(f"Trainer(profile_steps=...): {problem}, got {value!r}")


def clip_value(value: Any) -> float | None:
    """``clip_grad``: a positive maximum gradient norm, or None."""
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


def suggest(name: object, candidates: Iterable[str]) -> str:
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


def check_patience(patience: int | Mapping[str, int] | None) -> dict[str, int] | int | None:
    if patience is None or isinstance(patience, int):
        return positive_int("patience", patience, allow_none=True)  # type: ignore[no-any-return]
    return {rule: positive_int(f"patience[{rule!r}]", value) for rule, value in patience.items()}


def check_shard_size(value: int | str) -> int | str:
    """``max_shard_size``: bytes, or a size such as ``"10GB"`` or ``"500MB"``."""
    try:
        valid = convert_file_size_to_int(value) > 0 and not isinstance(value, bool)
    except (ValueError, TypeError, AttributeError):
        valid = False
    if not valid:
        raise TrainerConfigError(
            f"Trainer(max_shard_size=...): expected a number of bytes or a size such as "
            f"'10GB' or '500MB', got {value!r}"
        )
    return value
