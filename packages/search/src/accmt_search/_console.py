"""What the search says while it runs: one short line per trial, in place of optuna's own.

Values are shown to 4 significant digits (as the Trainer's progress bar shows them: enough to
tell trials apart on a validation set of up to some thousands of samples); the study and
``trials.csv`` keep them whole. Parameters are shown by their last name (``lr`` for
``optimizer_kwargs.lr``, unless two share it), floats to 3 significant digits, long text cut,
and a trial's parameters in at most ``PARAMS_WIDTH`` characters (``(+2 more)`` for the rest).
"""

from __future__ import annotations

import contextlib
import logging
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from ._trial import TrialOutcome

PARAMS_WIDTH = 100
TEXT_WIDTH = 20
ERROR_WIDTH = 120

# The loggers that write optuna's line per trial ("Trial 3 finished with value: ... and
# parameters: {...}. Best is ...", "Trial 3 pruned. ...", "Trial 3 failed with parameters ...").
OPTUNA_TRIAL_LOGGERS = ("optuna.study._optimize", "optuna.study.study")


def format_value(number: float) -> str:
    """An objective value as the search shows it: 4 significant digits."""
    return f"{number:.4g}"


def short_names(names: Iterable[str]) -> dict[str, str]:
    """Each parameter's name without its prefix (``optimizer_kwargs.lr`` -> ``lr``,
    ``module.hidden`` -> ``hidden``), where no other parameter ends the same."""
    tails = {name: name.rpartition(".")[2] for name in names}
    counts = Counter(tails.values())
    return {name: tail if counts[tail] == 1 else name for name, tail in tails.items()}


def short_value(value: Any) -> str:
    """A parameter's value: a float to 3 significant digits, any other cut to ``TEXT_WIDTH``."""
    if isinstance(value, float):
        return f"{value:.3g}"
    return _cut(str(value), TEXT_WIDTH)


def short_params(
    params: Mapping[str, Any], names: Mapping[str, str] | None = None, width: int = PARAMS_WIDTH
) -> str:
    """``lr=0.0194 weight_decay=0.0279 batch_size=32 ...`` in at most ``width`` characters (at
    least one parameter), ``(+N more)`` for those left out."""
    names = short_names(params) if names is None else names
    parts = [f"{names.get(name, name)}={short_value(item)}" for name, item in params.items()]
    shown: list[str] = []
    for index, part in enumerate(parts):
        rest = len(parts) - index - 1
        room = width - (len(f" (+{rest} more)") if rest else 0)
        if shown and len(" ".join([*shown, part])) > room:
            return " ".join([*shown, f"(+{len(parts) - index} more)"])
        shown.append(part)
    return " ".join(shown)


def trial_line(
    number: int,
    outcome: TrialOutcome,
    params: Mapping[str, Any],
    best: float | None,
    maximize: bool,
    retry_of: int | None = None,
) -> tuple[int, str]:
    """The level and text of the line logged when trial ``number`` ended. ``best``: the best
    value of the trials before it."""
    name = f"trial {number}" if retry_of is None else f"trial {number} (retry of {retry_of})"
    ran = f"{outcome.optimizer_steps} steps in {outcome.seconds:.1f} s"
    kind = outcome.kind
    if kind == "complete" and outcome.value is not None:
        better = best is None or (outcome.value > best if maximize else outcome.value < best)
        new = " (new best)" if better else ""
        said = f"{name} complete: {format_value(outcome.value)}{new}, {ran}"
    elif kind == "pruned":
        at = "" if outcome.value is None else f" at {format_value(outcome.value)}"
        said = f"{name} pruned{at}, {ran}"
    elif kind == "interrupted":
        return logging.INFO, f"{name} interrupted by a signal after {ran}; it will run again"
    else:
        error = _cut((outcome.error or "").splitlines()[0] if outcome.error else "", ERROR_WIDTH)
        level = logging.WARNING
        return level, f"{name} failed: {error}; {short_params(params)}"
    return logging.INFO, f"{said}; {short_params(params)}"


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


class _TrialLines(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("Trial ")


@contextlib.contextmanager
def without_optuna_trial_lines() -> Iterator[None]:
    """While the block runs, optuna's own line per trial is not logged: the search logs a
    shorter one (:func:`trial_line`). optuna's other messages pass."""
    quiet = _TrialLines()
    loggers = [logging.getLogger(name) for name in OPTUNA_TRIAL_LOGGERS]
    for logger in loggers:
        logger.addFilter(quiet)
    try:
        yield
    finally:
        for logger in loggers:
            logger.removeFilter(quiet)
