"""A progress bar over trials, on the main process, when stderr is a terminal; while it is shown,
log lines are written above it (through ``tqdm.write``), never glued onto it."""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator
from typing import Any, TextIO

from tqdm.auto import tqdm


class TrialProgress:
    """Trials finished out of n_trials, with the best value so far (4 significant digits)."""

    def __init__(self, total: int, enabled: bool, file: TextIO | None = None) -> None:
        self.stream = sys.stderr if file is None else file
        self.shown = enabled and self.stream.isatty()
        self.bar = tqdm(
            total=total,
            desc="trials",
            unit="trial",
            file=self.stream,
            disable=not self.shown,
            dynamic_ncols=True,
        )

    def show(self, finished: int, best: float | None) -> None:
        self.bar.n = min(finished, int(self.bar.total or finished))
        if best is not None:
            self.bar.set_postfix(best=f"{best:.4g}", refresh=False)
        self.bar.refresh()

    @contextlib.contextmanager
    def logging_above(self) -> Iterator[None]:
        """While the bar is shown, log lines go above it (see :func:`route_logging`)."""
        if not self.shown:
            yield
            return
        with route_logging(self.bar, self.stream):
            yield

    def close(self) -> None:
        self.bar.close()


class _AboveBar(logging.Handler):
    """Formats and filters as the console handler it stands in for, and writes through the bar:
    ``tqdm.write`` clears the bar, writes the line, and draws the bar again below it."""

    def __init__(self, replaced: logging.StreamHandler[Any], bar: tqdm[Any]) -> None:
        super().__init__(replaced.level)
        self.replaced = replaced
        self.bar = bar

    def filter(self, record: logging.LogRecord) -> bool:
        return bool(self.replaced.filter(record))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            type(self.bar).write(self.replaced.format(record), file=self.replaced.stream)
        except Exception:
            self.handleError(record)


@contextlib.contextmanager
def route_logging(bar: tqdm[Any], stream: TextIO) -> Iterator[None]:
    """Every console handler (a ``StreamHandler`` writing to ``stream``, stdout or stderr: the
    root logger's, optuna's own, any logger's, and logging's last resort) is replaced while the
    block runs by one that writes through ``bar``; all are put back after."""
    consoles = (stream, sys.stdout, sys.stderr)
    replaced: list[tuple[logging.Logger, logging.Handler, _AboveBar]] = []
    loggers = [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]
    for logger in loggers:
        if not isinstance(logger, logging.Logger):
            continue  # a placeholder for loggers not made yet
        for index, handler in enumerate(logger.handlers):
            if _writes_to(handler, consoles):
                assert isinstance(handler, logging.StreamHandler)
                logger.handlers[index] = above = _AboveBar(handler, bar)
                replaced.append((logger, handler, above))
    last_resort = logging.lastResort
    if last_resort is not None and _writes_to(last_resort, consoles):
        assert isinstance(last_resort, logging.StreamHandler)
        logging.lastResort = _AboveBar(last_resort, bar)
    try:
        yield
    finally:
        logging.lastResort = last_resort
        for logger, handler, above in replaced:
            if above in logger.handlers:
                logger.handlers[logger.handlers.index(above)] = handler


def _writes_to(handler: logging.Handler, streams: tuple[TextIO, ...]) -> bool:
    return (
        isinstance(handler, logging.StreamHandler)
        and not isinstance(handler, logging.FileHandler)
        and any(handler.stream is stream for stream in streams)
    )
