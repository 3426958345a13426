"""accmt 1.x's ``set_parameters`` names in a search space: their defaults, the
HyperParameters setting each fills, their shorthands (a list of two numbers is a range, a tuple
is a choice, a list of batch sizes is a choice, a dict of schedulers is a choice between them)
and the values each accepts."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ._distributions import Distribution, Fixed, FloatRange
from ._errors import SearchSpaceError
from ._specs import choice, float_range, int_range, is_number

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

_INT_NAMES = ("epochs", "max_steps", "train_batch_size", "eval_batch_size")
_LOG_NAMES = ("learning_rate", "eps")


def parse_one_x(name: str, value: Any, file: str | None) -> Distribution:
    """accmt 1.x's shorthands: list = range (a choice for batch sizes), tuple = choice, a dict of
    schedulers = a choice between them."""
    if name == "scheduler" and isinstance(value, Mapping):
        return choice(name, value, file)
    if isinstance(value, tuple) or (isinstance(value, list) and name.endswith("batch_size")):
        return choice(name, value, file)
    if not isinstance(value, list):
        return Fixed(value)
    if len(value) != 2 or not all(is_number(item) for item in value):
        raise SearchSpaceError(
            name,
            f"a range is a list of two numbers [low, high], got {value!r} (a tuple is a choice)",
            file,
        )
    low, high = value
    if name in _INT_NAMES:
        return int_range(name, {"low": low, "high": high}, file)
    return float_range(name, {"low": low, "high": high, "log": name in _LOG_NAMES}, file)


# ----------------------------------------------------------------- the 1.x names' bounds

# What each 1.x name accepts, checked on a range's ends and on every choice.
_BOUNDS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "train_batch_size": (lambda v: _whole(v) and v >= 1, "a whole number >= 1"),
    "eval_batch_size": (lambda v: v is None or (_whole(v) and v >= 1), "a whole number >= 1"),
    "epochs": (lambda v: _whole(v) and v >= 1, "a whole number >= 1"),
    "max_steps": (lambda v: v is None or (_whole(v) and v >= 1), "None or a whole number >= 1"),
    "learning_rate": (lambda v: is_number(v) and v > 0, "a positive number"),
    "eps": (lambda v: is_number(v) and v > 0, "a positive number"),
    "beta1": (lambda v: is_number(v) and 0 <= v < 1, "a number in [0, 1)"),
    "beta2": (lambda v: is_number(v) and 0 <= v < 1, "a number in [0, 1)"),
    "weight_decay": (lambda v: is_number(v) and v >= 0, "a number >= 0"),
    "warmup_ratio": (lambda v: is_number(v) and 0 <= v <= 1, "a number in [0, 1]"),
    "step_scheduler_per_epoch": (lambda v: isinstance(v, bool), "true or false"),
}


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_bounds(name: str, parsed: Distribution, file: str | None) -> None:
    rule = _BOUNDS.get(name)
    if rule is None:
        return
    accepts, expected = rule
    for value in parsed.probes():
        if not accepts(value):
            raise SearchSpaceError(name, f"must be {expected}, got {value!r}", file)
