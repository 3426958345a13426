"""``best_metric_fn`` before a trial spends on it: checked against the names the Trainer's sanity
check reported, and named after the value it returns (the plots' axis: "validation accuracy")."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ._errors import MetricNameError
from ._metrics import EvaluationMetrics, objective_value, validation_loss

Objective = Callable[[EvaluationMetrics], Any]


def read_objective(
    objective: Objective, results: Mapping[str, Mapping[str, float]]
) -> tuple[float, str]:
    """``objective`` of one evaluation's ``results``: its value, and what it is called."""
    value = objective_value(objective(EvaluationMetrics(results)))
    return value, _name(objective, results, value)


def check_objective(objective: Objective, reported: Mapping[str, Sequence[str]]) -> str | None:
    """Run ``objective`` on stand-in values of the names each set ``reported`` (a sanity check's),
    so that a set or a name it reads and nothing reports raises :class:`MetricNameError` before
    the trial trains. Returns what the objective is called, or None when it failed on the
    stand-ins for another reason (the first evaluation will tell, on true values)."""
    # Distinct values between 0.5 and 1, so that the one an objective returns as it read it
    # names it, and arithmetic on them (a log, a ratio, 1 - x) does not fail.
    count = sum(len(names) for names in reported.values())
    places = iter(range(1, count + 1))
    stand_ins = {
        key: {name: 0.5 + 0.5 * next(places) / (count + 1) for name in names}
        for key, names in reported.items()
    }
    try:
        return read_objective(objective, stand_ins)[1]
    except MetricNameError:
        raise
    except Exception:
        return None


def _name(objective: Objective, results: Mapping[str, Mapping[str, float]], value: float) -> str:
    """ "validation loss" for the default; "validation accuracy" (or "accuracy (clean)" for a set
    of a dict) when the objective returns one value of the results as it is, and no other value
    equals it; else the function's own name; else "objective"."""
    if objective is validation_loss:
        sets = len(results)
        return "validation loss" if sets < 2 else f"validation loss (mean of {sets} sets)"
    found = [
        (key, name)
        for key, values in results.items()
        for name, read in values.items()
        if read == value
    ]
    if len(found) == 1:
        key, name = found[0]
        return f"validation {name}" if key == "validation" else f"{name} ({key})"
    function = getattr(objective, "__name__", "")
    return function if function and function not in ("<lambda>", "objective") else "objective"
