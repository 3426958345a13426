"""``best_metric_fn`` before a trial spends on it: checked against the names the Trainer's sanity
check reported, and named after what it reads (the plots' axis: "validation accuracy")."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ._metrics import (
    EvaluationMetrics,
    MetricNameError,
    SetMetrics,
    objective_value,
    validation_loss,
)

Objective = Callable[[EvaluationMetrics], Any]
Reads = list[tuple[str, str]]


class _ReadSet(SetMetrics):
    """A set's results that note each name read."""

    def __init__(self, values: Mapping[str, float], key: str, reads: Reads) -> None:
        super().__init__(values, key)
        self.reads = reads

    def __getitem__(self, name: str) -> float:
        value = super().__getitem__(name)
        self.reads.append((self.key, name))
        return value


class _ReadSets(EvaluationMetrics):
    def __init__(self, results: Mapping[str, Mapping[str, float]], reads: Reads) -> None:
        super().__init__({})
        self.update({key: _ReadSet(values, key, reads) for key, values in results.items()})


def read_objective(
    objective: Objective, results: Mapping[str, Mapping[str, float]]
) -> tuple[float, str]:
    """``objective`` of one evaluation's ``results``: its value, and what it is called."""
    reads: Reads = []
    value = objective_value(objective(_ReadSets(results, reads)))
    return value, _name(objective, results, reads, value)


def check_objective(objective: Objective, reported: Mapping[str, Sequence[str]]) -> str | None:
    """Run ``objective`` on stand-in values of the names each set ``reported`` (a sanity check's),
    so that a set or a name it reads and nothing reports raises :class:`MetricNameError` before
    the trial trains. Returns what the objective is called, or None when it failed on the
    stand-ins for another reason (the first evaluation will tell, on true values)."""
    # Distinct values between 0.5 and 1, so that an objective that returns one of them as it is
    # is named after it, and arithmetic on them (a log, a ratio, 1 - x) does not fail.
    stand_ins: dict[str, dict[str, float]] = {}
    for key, names in reported.items():
        stand_ins[key] = {
            name: 0.5 + (len(stand_ins) * 64 + index + 1) / 8192 for index, name in enumerate(names)
        }
    try:
        return read_objective(objective, stand_ins)[1]
    except MetricNameError:
        raise
    except Exception:
        return None


def _name(
    objective: Objective, results: Mapping[str, Mapping[str, float]], reads: Reads, value: float
) -> str:
    """ "validation accuracy" for an objective that returns one value as it reads it, "validation
    loss" for the default, else the function's own name, else "objective"."""
    if objective is validation_loss:
        return (
            "validation loss"
            if len(results) < 2
            else f"validation loss (mean of {len(results)} sets)"
        )
    read = list(dict.fromkeys(reads))
    if len(read) == 1 and results[read[0][0]][read[0][1]] == value:
        key, name = read[0]
        return f"validation {name}" if key == "validation" else f"{name} ({key})"
    function = getattr(objective, "__name__", "")
    return function if function and function != "<lambda>" else "objective"
