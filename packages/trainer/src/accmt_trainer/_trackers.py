"""Choosing Accelerate's trackers, and flattening the run's configuration for them."""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from typing import Any

LogWith = str | list[str] | None


def resolve_trackers(log_with: LogWith) -> list[str] | None:
    """``"auto"`` means TensorBoard when it is installed, else no tracker."""
    if log_with == "auto":
        installed = importlib.util.find_spec("tensorboard") or importlib.util.find_spec(
            "tensorboardX"
        )
        return ["tensorboard"] if installed else None
    if log_with is None or log_with == []:
        return None
    return [log_with] if isinstance(log_with, str) else list(log_with)


def flatten(config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested configuration as flat scalar keys (``optimizer_kwargs.lr``), as trackers need."""
    flat: dict[str, Any] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten(value, f"{name}."))
        elif isinstance(value, (bool, int, float, str)):
            flat[name] = value
        else:
            flat[name] = str(value)
    return flat
