"""What a run says on the console: one line when it starts (afresh, or resumed from which
checkpoint, epoch and step) and one line per evaluation, on the "accmt_trainer" logger, from
the main process only.

A program that configured no logging (no handler on this logger, none on the root logger)
would see no INFO line; during ``fit`` these lines then go to stderr through ``tqdm.write``,
above the progress bar when one is showing. A program that configured logging keeps its own
choice: the lines reach its handlers when the logger's level lets INFO through.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from tqdm.auto import tqdm

if TYPE_CHECKING:
    from accmt_state import TrainingState

LOGGER = "accmt_trainer"
logger = logging.getLogger(LOGGER)


class _TqdmHandler(logging.Handler):
    """Each record as one line on stderr, written above a progress bar that is showing."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            tqdm.write(self.format(record), file=sys.stderr)
        except Exception:
            self.handleError(record)


@contextlib.contextmanager
def console_lines(main_process: bool) -> Iterator[None]:
    """While the block runs, the logger's INFO lines reach stderr on the main process, unless
    the program configured logging itself (a handler on this logger or on the root logger)."""
    configured = logger.handlers or logging.getLogger().handlers
    if configured or not main_process:
        yield
        return
    handler = _TqdmHandler()
    handler.setFormatter(logging.Formatter("%(message)s"))
    level = logger.level
    logger.addHandler(handler)
    if level == logging.NOTSET:
        logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def processes(count: int) -> str:
    """``1 process``, ``2 processes``: how a line names a number of processes."""
    return "1 process" if count == 1 else f"{count} processes"


def number(value: float) -> str:
    """A value as the console and the progress bar show it: 4 decimals, or 4 significant
    digits when it is very small or very large."""
    return f"{value:.4f}" if value == 0 or 1e-3 <= abs(value) < 1e5 else f"{value:.4g}"


def metrics_line(
    state: TrainingState, epochs: int, results: Mapping[str, Mapping[str, float]]
) -> str:
    """One evaluation: ``epoch 3/25 step 135: validation loss=0.1234 accuracy=0.9750``."""
    sets = "; ".join(
        f"{key} " + " ".join(f"{name}={number(value)}" for name, value in values.items())
        for key, values in results.items()
    )
    return f"epoch {min(state.epoch + 1, epochs)}/{epochs} step {state.global_step}: {sets}"


def evaluation_postfix(results: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """An evaluation's values for the progress bar: ``val_loss`` and each metric by name with
    one validation set, ``<set>/<name>`` with several."""
    if len(results) == 1:
        (values,) = results.values()
        return {("val_loss" if name == "loss" else name): value for name, value in values.items()}
    return {
        f"{key}/{name}": value for key, values in results.items() for name, value in values.items()
    }
