"""SIGINT and SIGTERM during a search: the current trial ends cleanly, no new trial starts."""

from __future__ import annotations

import signal
import threading
from types import FrameType, TracebackType


class StopSignals:
    """Notes SIGINT (Ctrl-C) and SIGTERM while the search runs, instead of raising.

    While a trial trains, the Trainer's own handler takes the signal: it finishes the step,
    checkpoints and returns from ``fit``, and the search sees an unfinished trial. Between trials
    (or while a module is built) this handler notes it, and the search stops before the next.
    """

    def __init__(self) -> None:
        self.received: int | None = None
        self._previous: dict[int, object] = {}

    def __call__(self) -> bool:
        return self.received is not None

    def _note(self, signum: int, frame: FrameType | None) -> None:
        self.received = signum

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._previous[sig] = signal.signal(sig, self._note)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]
        self._previous.clear()
