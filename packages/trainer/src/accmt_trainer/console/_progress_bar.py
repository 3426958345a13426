"""The progress bar: tqdm, on the main process, when stderr is a terminal."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from tqdm.auto import tqdm

from ._console import number


def shows_progress(enabled: bool, is_main_process: bool) -> bool:
    """The rule of every bar: shown when asked, on the main process, when stderr is a
    terminal (a bar in a log file is noise)."""
    return enabled and is_main_process and sys.stderr.isatty()


class ProgressBar:
    """A tqdm bar on the main process only, off when asked or when stderr is not a terminal.

    Its postfix shows the latest training values and the latest evaluation's, which stay
    shown on the next epochs' bars until the next evaluation."""

    def __init__(self, enabled: bool, is_main_process: bool) -> None:
        self._enabled = shows_progress(enabled, is_main_process)
        self._bar: Any = None
        self._training: dict[str, str] = {}
        self._evaluation: dict[str, str] = {}

    def start_epoch(self, epoch: int, epochs: int, total: int | None, done: int) -> None:
        """A bar for ``epoch``'s batches; without a ``total`` (a stream without a length), a
        count of them."""
        if not self._enabled:
            return
        self.close()
        self._bar = tqdm(total=total, initial=done, desc=f"epoch {epoch + 1}/{epochs}")
        self._refresh()

    def advance(self) -> None:
        if self._bar is not None:
            self._bar.update(1)

    def show(self, values: Mapping[str, float]) -> None:
        """The training values of a logging step."""
        self._training = {name: f"{value:.4g}" for name, value in values.items()}
        self._refresh()

    def show_evaluation(self, values: Mapping[str, float]) -> None:
        """The values of the latest evaluation."""
        self._evaluation = {name: number(value) for name, value in values.items()}
        self._refresh()

    def _refresh(self) -> None:
        if self._bar is not None:
            self._bar.set_postfix({**self._training, **self._evaluation}, refresh=False)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
