"""Every exception class of accmt-search. ``SearchError`` is the base of what a search raises,
each also a fitting built-in; ``MetricNameError`` is what ``best_metric_fn`` meets reading a
metric that is not there (a ``KeyError``, as from a dict); ``TrialEnded`` never leaves the
package."""

from __future__ import annotations

import os
from typing import Any


class SearchError(Exception):
    """Base class of every error accmt-search raises."""


class SearchSpaceError(SearchError, ValueError):
    """A parameter of the search space is unknown or has a bad range, choice or value.

    ``key`` is the parameter as written in the space (``"learning_rate"``,
    ``"module.hidden_size"``, ``"optimizer_kwargs.momentum"``); ``problem`` says what is wrong;
    ``file`` is the YAML file it was read from (None for a space given in Python). The message
    is ``"file: search.key: problem"``, or ``"key: problem"`` for a space given in Python.
    """

    def __init__(self, key: str, problem: str, file: str | os.PathLike[str] | None = None) -> None:
        self.key = key
        self.problem = problem
        self.file = None if file is None else os.fspath(file)
        where = f"search.{key}" if key else "search"
        if self.file is not None:
            where = f"{self.file}: {where}"
        elif key:
            where = key
        super().__init__(f"{where}: {problem}")

    def __reduce__(self) -> tuple[Any, ...]:
        # Errors cross process boundaries (a launcher's workers) by pickle.
        return (type(self), (self.key, self.problem, self.file))


class SearchConfigError(SearchError, ValueError):
    """An option of ``HyperParameterSearch`` or of ``optimize`` is invalid; the message names it."""


class StudyError(SearchError, RuntimeError):
    """The study cannot be continued as asked, or ended without a result; the message says why."""


class MetricNameError(KeyError):
    """``best_metric_fn`` read a validation set or a name that the evaluation does not report.

    Every trial would fail alike, so the search stops at the first (which does not count toward
    ``n_trials``). The message names the set and the key, with the closest names reported.
    """

    def __str__(self) -> str:
        return str(self.args[0])


class TrialEnded(Exception):
    """Raised to optuna (never to user code) to record a trial as failed: by its own error,
    interrupted by a signal (then queued again), or asked past n_trials."""
