"""What a search leaves to read: a table of the best trials, a CSV of all, and PNG plots."""

from __future__ import annotations

import csv
import logging
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from ._study import record_of

logger = logging.getLogger("accmt_search")

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


def table(study: optuna.Study, count: int = 5) -> str:
    """The best trials as a text table: number, value, optimizer steps and parameters."""
    rows = [["trial", "value", "steps", "parameters"]]
    for trial in best_trials(study, count):
        params = ", ".join(f"{name}={_short(value)}" for name, value in trial.params.items())
        steps = record_of(trial).get("optimizer_steps", "")
        rows.append([str(trial.number), f"{trial.value:.6g}", str(steps), params])
    widths = [max(len(row[column]) for row in rows) for column in range(3)]
    lines = [
        "  ".join([*(cell.rjust(width) for cell, width in zip(row, widths, strict=False)), row[3]])
        for row in rows
    ]
    return "\n".join(lines)


def _short(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


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


PLOTS = ("optimization_history", "param_importances", "parallel_coordinate")


def write_plots(study: optuna.Study, folder: Path) -> list[Path]:
    """The optimization history, parameter importances and parallel coordinates as PNGs, through
    optuna's matplotlib visualisation. A plot the study cannot make yet (too few completed
    trials, nothing varied) is skipped with a warning: it is not worth failing a search for."""
    import matplotlib.pyplot as plt
    from optuna.visualization import matplotlib as visualization

    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name in PLOTS:
        draw = getattr(visualization, f"plot_{name}")
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                axes = draw(study)
        except (ValueError, RuntimeError, ZeroDivisionError) as error:
            logger.warning("accmt_search: no %s plot: %s", name, error)
            continue
        figure = getattr(axes, "figure", None) or axes.flat[0].figure
        path = folder / f"{name}.png"
        figure.savefig(path, dpi=100, bbox_inches="tight")
        plt.close(figure)
        written.append(path)
    return written
