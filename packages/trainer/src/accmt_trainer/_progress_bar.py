"""The progress bar: tqdm, on the main process, when stderr is a terminal."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from tqdm.auto import tqdm


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
