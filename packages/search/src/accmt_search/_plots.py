"""The search's PNG plots, drawn with matplotlib on a white background: the history of every
trial (pruned ones at the value they were stopped at) beside each trial's evaluations, the
parameters' importances, and every trial's parameters on parallel axes.

The y axes say what the objective is ("validation accuracy", from the value ``best_metric_fn``
returns; see ``_objective``). Figures are made without pyplot, so nothing global is touched.
"""

from __future__ import annotations

import textwrap
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from ._log import logger
from ._parallel_coordinates import fences, parallel_figure
from ._study import record_of

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

PLOTS = ("optimization_history", "param_importances", "parallel_coordinate")
COMPLETE, PRUNED, FAILED, BEST = "tab:blue", "0.55", "tab:red", "tab:orange"


def write_plots(study: optuna.Study, folder: Path, objective: str) -> list[Path]:
    """Each of ``PLOTS`` as ``folder/<name>.png``. A plot the study cannot make yet (too few
    completed trials, nothing varied) is skipped with a warning: not worth failing a search."""
    folder.mkdir(parents=True, exist_ok=True)
    trials = study.get_trials(deepcopy=False)
    maximize = study.direction == optuna.study.StudyDirection.MAXIMIZE
    makers: dict[str, Callable[[], Figure]] = {
        "optimization_history": lambda: history_figure(trials, maximize, objective),
        "param_importances": lambda: importances_figure(study, objective),
        "parallel_coordinate": lambda: parallel_figure(trials, maximize, objective),
    }
    written = []
    for name in PLOTS:
        try:
            figure = makers[name]()
        except (ValueError, RuntimeError, ZeroDivisionError) as error:
            logger.warning("accmt_search: no %s plot: %s", name, error)
            continue
        path = folder / f"{name}.png"
        figure.savefig(path, dpi=110, bbox_inches="tight", facecolor="white")
        written.append(path)
    return written


def new_figure(width: float, height: float, columns: int = 1) -> tuple[Figure, list[Axes]]:
    """A white figure of ``columns`` axes side by side, with a light grid behind the data."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), layout="constrained", facecolor="white")
    axes = [figure.add_subplot(1, columns, index + 1) for index in range(columns)]
    for ax in axes:
        ax.set_facecolor("white")
        ax.grid(True, color="0.9", linewidth=0.8)
        ax.set_axisbelow(True)
        ax.spines[["top", "right"]].set_visible(False)
    return figure, axes


def last_value(trial: FrozenTrial) -> float | None:
    """A pruned trial's value: the last it reported before it was stopped."""
    steps = trial.intermediate_values
    return steps[max(steps)] if steps else None


def history_figure(trials: Sequence[FrozenTrial], maximize: bool, objective: str) -> Figure:
    """Left: every trial's value by number (complete: dots; pruned: crosses at the value they
    were stopped at; failed: ticks on the axis) and the best so far. Right: each trial's value
    at each of its evaluations, the curves the pruner compared."""
    complete = [t for t in trials if t.state == TrialState.COMPLETE and t.value is not None]
    pruned = [(t.number, last_value(t)) for t in trials if t.state == TrialState.PRUNED]
    stopped = [(number, value) for number, value in pruned if value is not None]
    failed = [t.number for t in trials if _failed(t)]
    if not complete and not stopped:
        raise ValueError("no trial has a value yet")
    from matplotlib.ticker import MaxNLocator

    figure, (history, curves) = new_figure(12, 4.6, columns=2)
    points = [(t.number, float(t.value or 0.0)) for t in complete]
    low, high = fences([value for _, value in [*points, *stopped]])
    pad = 0.08 * (high - low) or 0.05 * abs(low) or 0.05
    history.set_ylim(low - pad, high + pad)
    marks = {"gid": "complete", "color": COMPLETE, "s": 28, "zorder": 3}
    _scatter(history, points, (low, high, pad), f"complete ({len(complete)})", marks)
    if stopped:
        marks = {"gid": "pruned", "marker": "x", "color": PRUNED, "s": 30, "zorder": 2}
        label = f"pruned, at its last evaluation ({len(stopped)})"
        _scatter(history, stopped, (low, high, pad), label, marks)
    if failed:
        history.scatter(
            failed,
            [0.0] * len(failed),
            marker="|",
            color=FAILED,
            s=150,
            transform=history.get_xaxis_transform(),
            label=f"failed, no value ({len(failed)})",
            gid="failed",
        )
    if complete:
        numbers, best = _best_so_far(complete, maximize)
        best = [min(max(value, low - pad), high + pad) for value in best]
        history.step(numbers, best, where="post", color=BEST, linewidth=1.8, label="best so far")
    if any(not low <= value <= high for _, value in [*points, *stopped]):
        history.scatter([], [], marker="v", color="0.3", label="beyond the range shown (value)")
    history.set(xlabel="trial", ylabel=objective, title="every trial")
    history.xaxis.set_major_locator(MaxNLocator(integer=True))
    history.legend(loc="best", fontsize=8, framealpha=0.9)
    _curves(curves, trials, objective)
    return figure


def _scatter(
    ax: Axes,
    points: Sequence[tuple[int, float]],
    limits: tuple[float, float, float],
    label: str,
    marks: dict[str, Any],
) -> None:
    """``points`` (trial, value) as marks; one beyond the fences (``limits``: low, high, pad)
    stands at the plot's edge as a triangle, with its value beside it."""
    low, high, pad = limits
    inside = [(x, y) for x, y in points if low <= y <= high]
    ax.scatter([x for x, _ in inside], [y for _, y in inside], label=label, **marks)
    for x, y in points:
        if low <= y <= high:
            continue
        edge, marker = (low - 0.6 * pad, "v") if y < low else (high + 0.6 * pad, "^")
        ax.scatter([x], [edge], **{**marks, "marker": marker})
        ax.annotate(
            f"{y:.3g}",
            (x, edge),
            xytext=(0, 6 if y < low else -6),
            textcoords="offset points",
            ha="center",
            va="bottom" if y < low else "top",
            rotation=90,
            fontsize=7,
            color="0.3",
        )


def _failed(trial: FrozenTrial) -> bool:
    return trial.state == TrialState.FAIL and record_of(trial).get("outcome") == "failed"


def _best_so_far(complete: Sequence[FrozenTrial], maximize: bool) -> tuple[list[int], list[float]]:
    numbers: list[int] = []
    best: list[float] = []
    for trial in sorted(complete, key=lambda t: t.number):
        assert trial.value is not None
        better = not best or (trial.value > best[-1] if maximize else trial.value < best[-1])
        numbers.append(trial.number)
        best.append(trial.value if better else best[-1])
    return numbers, best


def _curves(ax: Axes, trials: Sequence[FrozenTrial], objective: str) -> None:
    """Each complete or pruned trial's value at each evaluation; pruned ones end in a cross."""
    from matplotlib.ticker import MaxNLocator

    shown = [t for t in trials if t.state in (TrialState.COMPLETE, TrialState.PRUNED)]
    for trial in sorted(shown, key=lambda t: t.state == TrialState.COMPLETE):
        if not trial.intermediate_values:
            continue
        steps, values = zip(*sorted(trial.intermediate_values.items()), strict=True)
        if trial.state == TrialState.COMPLETE:
            ax.plot(steps, values, color=COMPLETE, alpha=0.8, linewidth=1.2)
        else:
            ax.plot(steps, values, color=PRUNED, alpha=0.7, linewidth=1.0)
            ax.scatter(steps[-1:], values[-1:], marker="x", color=PRUNED, s=30, zorder=2)
    ax.plot([], [], color=COMPLETE, label="complete")
    ax.plot([], [], color=PRUNED, marker="x", label="pruned (stopped at the cross)")
    ax.set(xlabel="evaluation", ylabel=objective, title="each trial's evaluations")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.legend(loc="best", fontsize=8, framealpha=0.9)


def importances_figure(study: optuna.Study, objective: str) -> Figure:
    """How much of the objective's variance each parameter explains (optuna's fANOVA over the
    complete trials), largest first."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        importances = optuna.importance.get_param_importances(study)
    if not importances:
        raise ValueError("no parameter varied among the complete trials")
    names = list(importances)[::-1]
    values = [importances[name] for name in names]
    figure, (ax,) = new_figure(7.5, 0.45 * len(names) + 1.4)
    ax.barh(names, values, color=COMPLETE)
    for index, value in enumerate(values):
        label = f"{value:.2f}" if value >= 0.01 else "<0.01"
        ax.text(value, index, f" {label}", va="center", fontsize=8)
    ax.set_xlim(0, max(values) * 1.15 or 1.0)
    ax.grid(False, axis="y")
    wrapped = textwrap.shorten(objective, 60)
    ax.set(xlabel=f"share of {wrapped}'s variance (fANOVA, sums to 1)", title="importance")
    return figure
