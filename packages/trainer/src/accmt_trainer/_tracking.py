"""Choosing trackers, flattening the run's configuration, and the progress bar."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Mapping
from typing import Any

from tqdm.auto import tqdm

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


class ProgressBar:
    """A tqdm bar on the main process only, off when asked or when stderr is not a terminal."""

    def __init__(self, enabled: bool, is_main_process: bool) -> None:
        self._enabled = enabled and is_main_process and sys.stderr.isatty()
        self._bar: Any = None

    def start_epoch(self, epoch: int, epochs: int, total: int, done: int) -> None:
        if not self._enabled:
            return
        self.close()
        self._bar = tqdm(total=total, initial=done, desc=f"epoch {epoch + 1}/{epochs}")

    def advance(self) -> None:
        if self._bar is not None:
            self._bar.update(1)

    def show(self, values: Mapping[str, float]) -> None:
        if self._bar is not None:
            self._bar.set_postfix({k: f"{v:.4g}" for k, v in values.items()}, refresh=False)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
