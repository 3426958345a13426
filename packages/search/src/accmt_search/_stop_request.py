"""The search's stop request: SIGINT or SIGTERM ends the current trial cleanly and no new
trial starts."""

from __future__ import annotations


class StopRequest:
    """The search's stop request, which the Trainer's ``stop_on_signals`` sets.

    While a trial trains, the Trainer's own handler takes the signal: it finishes the step,
    checkpoints and returns from ``fit``, and the search sees an unfinished trial. Between trials
    (or while a module is built) the search's handler sets this, and the search stops before the
    next trial.
    """

    def __init__(self) -> None:
        self.reason: str | None = None

    def __call__(self) -> bool:
        return self.reason is not None

    def request(self, reason: str) -> None:
        if self.reason is None:
            self.reason = reason
