"""What a search leaves to read: a table of the best trials, a CSV of all, and PNG plots."""

from __future__ import annotations

import csv
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from ._console import format_value, short_names, short_params
from ._study import record_of

# What the search records of each trial, in the CSV's order (after number, state and value).
ATTRIBUTES = (
    "outcome",
    "folder",
    "retry_of",
    "optimizer_steps",
    "global_step",
    "resumed_from_step",
    "seconds",
    "error",
)


def best_trials(study: optuna.Study, count: int) -> list[FrozenTrial]:
    """The ``count`` best completed trials, best first."""
    done = list(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)))
    maximize = study.direction == optuna.study.StudyDirection.MAXIMIZE
    return sorted(done, key=lambda t: t.value if t.value is not None else 0.0, reverse=maximize)[
        :count
    ]


def summary(study: optuna.Study, trials: Sequence[FrozenTrial], count: int = 5) -> str:
    """``best 5 of 20 trials (7 complete, 13 pruned):`` and the table of those best trials."""
    counts = Counter(_ending(trial) for trial in trials)
    ends = ", ".join(
        f"{counts[end]} {end}" for end in ("complete", "pruned", "failed") if counts[end]
    )
    best = best_trials(study, count)
    heading = f"best {len(best)} of {sum(counts.values()) - counts['']} trials ({ends})"
    return f"{heading}:\n{table(best)}"


def _ending(trial: FrozenTrial) -> str:
    """How ``trial`` finished, as the search counts it ("" for one that does not count)."""
    if trial.state == TrialState.COMPLETE:
        return "complete"
    if trial.state == TrialState.PRUNED:
        return "pruned"
    failed = trial.state == TrialState.FAIL and record_of(trial).get("outcome") == "failed"
    return "failed" if failed else ""


def table(trials: Sequence[FrozenTrial]) -> str:
    """Trials as a text table: number, value (4 significant digits), optimizer steps and
    parameters (shortened as the line of each trial shortens them)."""
    rows = [["trial", "value", "steps", "parameters"]]
    names = short_names({name for trial in trials for name in trial.params})
    for trial in trials:
        params = short_params(trial.params, names)
        steps = record_of(trial).get("optimizer_steps", "")
        value = "" if trial.value is None else format_value(trial.value)
        rows.append([str(trial.number), value, str(steps), params])
    widths = [max(len(row[column]) for row in rows) for column in range(3)]
    lines = [
        "  ".join([*(cell.rjust(width) for cell, width in zip(row, widths, strict=False)), row[3]])
        for row in rows
    ]
    return "\n".join(lines)


def write_csv(trials: Sequence[FrozenTrial], path: Path) -> None:
    """Every trial on a row: number, state, value, the search's attributes, times, parameters."""
    params = sorted({name for trial in trials for name in trial.params})
    header = ["number", "state", "value", *ATTRIBUTES, "started", "completed"]
    header += [f"params_{name}" for name in params]
    with open(path, "w", newline="", encoding="utf-8") as stream:
        writer = csv.writer(stream)
        writer.writerow(header)
        for trial in trials:
            writer.writerow(
                [
                    trial.number,
                    trial.state.name,
                    "" if trial.value is None else trial.value,
                    *(_cell(record_of(trial).get(name)) for name in ATTRIBUTES),
                    trial.datetime_start or "",
                    trial.datetime_complete or "",
                    *(trial.params.get(name, "") for name in params),
                ]
            )


def _cell(value: Any) -> Any:
    return "" if value is None else value
