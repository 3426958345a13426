"""Every trial's parameters on parallel axes, readable: one vertical axis per parameter, in the
order the space gives them, then the objective; a few ticks per axis, labelled beside it on a
white ground (log axes at 1, 2, 5 per decade, choices by name); complete trials as lines coloured
by their value (the better, the darker), the best in red, pruned trials as grey lines through
their parameters only (they have no final value)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import attrs
from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)
from optuna.trial import FrozenTrial, TrialState

from ._console import short_names

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

PRUNED, BEST, AXIS = "0.8", "tab:red", "0.35"
LABEL_WIDTH = 16
# Behind each tick label, so that the lines crossing it do not hide it.
GROUND = {"facecolor": "white", "edgecolor": "none", "alpha": 0.8, "pad": 0.6}


@attrs.frozen
class Axis:
    """One vertical axis: its label, where a value stands on it (0 to 1), and its ticks."""

    label: str
    position: Callable[[Any], float]
    ticks: list[tuple[float, str]]


def parallel_figure(trials: Sequence[FrozenTrial], maximize: bool, objective: str) -> Figure:
    from matplotlib import colormaps
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import ListedColormap, Normalize
    from matplotlib.figure import Figure

    complete = [t for t in trials if t.state == TrialState.COMPLETE and t.value is not None]
    if not complete:
        raise ValueError("no trial has completed yet")
    pruned = [t for t in trials if t.state == TrialState.PRUNED]
    names = list(dict.fromkeys(name for trial in complete for name in trial.params))
    labels = short_names(names)
    distributions: dict[str, BaseDistribution] = {}
    for trial in [*complete, *pruned]:
        for name, distribution in trial.distributions.items():
            distributions.setdefault(name, distribution)
    axes = [parameter_axis(labels[name], distributions[name]) for name in names]
    values = [float(t.value) for t in complete if t.value is not None]
    low, high = fences(values)
    axes.append(numeric_axis(objective, low, high, log=False, integer=False))
    outside = (min(values) < low, max(values) > high)

    figure = Figure(figsize=(min(max(6.0, 1.8 * len(axes) + 2.0), 26.0), 5.2), facecolor="white")
    figure.set_layout_engine("constrained")
    ax = figure.add_subplot()
    # Lighter than viridis' last yellow, which is lost on white; the better, the darker.
    shades = colormaps["viridis"].resampled(256)(list(_steps(0.85, 0.0, 256)))
    palette = ListedColormap(shades if maximize else shades[::-1])
    norm = Normalize(low, high if high > low else low + 1, clip=True)
    parameters = range(len(names))
    for trial in pruned:
        ys = [_at(axis, trial.params.get(name)) for axis, name in zip(axes, names, strict=False)]
        ax.plot(parameters, ys, color=PRUNED, linewidth=0.9, zorder=1, gid="pruned")
    best = max(complete, key=lambda t: _goodness(t, maximize))  # the first of equals, as optuna's
    worst_first = sorted(complete, key=lambda t: (_goodness(t, maximize), t is best))
    for trial in worst_first:
        ys = [_at(axis, trial.params.get(name)) for axis, name in zip(axes, names, strict=False)]
        ys.append(axes[-1].position(trial.value))
        if trial is best:
            label = f"best: trial {trial.number}"
            ax.plot(
                range(len(axes)), ys, color=BEST, linewidth=2.6, zorder=3, gid="best", label=label
            )
        else:
            color = palette(norm(_goodness(trial, maximize=True)))
            ax.plot(range(len(axes)), ys, color=color, linewidth=1.4, zorder=2, gid="complete")
    if pruned:
        ax.plot([], [], color=PRUNED, linewidth=0.9, label=f"pruned ({len(pruned)})")
    _mark_outliers(axes[-1], values, low, high)
    _draw_axes(ax, axes)
    extend = {(True, True): "both", (True, False): "min", (False, True): "max"}.get(
        outside, "neither"
    )
    figure.colorbar(
        ScalarMappable(norm, palette),
        ax=ax,
        label=objective,
        fraction=0.03,
        pad=0.01,
        extend=extend,
    )
    ax.legend(loc="upper left", bbox_to_anchor=(0.0, -0.12), ncols=2, fontsize=8, frameon=False)
    ax.set_title(f"{len(complete)} complete trials, coloured by {objective}; pruned in grey")
    return figure


def _mark_outliers(axis: Axis, values: Sequence[float], low: float, high: float) -> None:
    """Values beyond the fences stand at the axis' ends: say so there."""
    ends = []
    if min(values) < low:
        ends.append((0.0, f"≤ {_number(low, False)} (min {_number(min(values), False)})"))
    if max(values) > high:
        ends.append((1.0, f"≥ {_number(high, False)} (max {_number(max(values), False)})"))
    kept = [tick for tick in axis.ticks if all(abs(tick[0] - end) > 0.08 for end, _ in ends)]
    axis.ticks[:] = [*kept, *ends]


def _goodness(trial: FrozenTrial, maximize: bool) -> float:
    value = float(trial.value) if trial.value is not None else math.nan
    return value if maximize else -value


def _steps(start: float, stop: float, count: int) -> Sequence[float]:
    return [start + (stop - start) * index / (count - 1) for index in range(count)]


def _at(axis: Axis, value: Any) -> float:
    """Where ``value`` stands on ``axis``; NaN (a gap in the line) for a parameter the trial
    did not have (a conditional space)."""
    return math.nan if value is None else axis.position(value)


def _draw_axes(ax: Axes, axes: Sequence[Axis]) -> None:
    for x, axis in enumerate(axes):
        ax.plot([x, x], [0.0, 1.0], color=AXIS, linewidth=1.0, zorder=0.5)
        for y, text in axis.ticks:
            ax.plot([x - 0.04, x], [y, y], color=AXIS, linewidth=1.0, zorder=0.5)
            ax.text(x - 0.06, y, text, ha="right", va="center", fontsize=8, zorder=4, bbox=GROUND)
    ax.set_xticks(range(len(axes)), [axis.label for axis in axes], fontsize=9)
    ax.set_xlim(-0.75, len(axes) - 0.8)
    ax.set_ylim(-0.04, 1.04)
    ax.set_yticks([])
    ax.tick_params(axis="x", length=0)
    ax.spines[:].set_visible(False)


def parameter_axis(label: str, distribution: BaseDistribution) -> Axis:
    """The axis of one parameter, from its distribution: every choice, or its whole range."""
    if isinstance(distribution, CategoricalDistribution):
        choices = list(distribution.choices)
        spread = {choice: _share(index, len(choices)) for index, choice in enumerate(choices)}
        ticks = [(spread[choice], _cut(str(choice))) for choice in choices]
        return Axis(_wrap(label), lambda value: spread.get(value, math.nan), ticks)
    if not isinstance(distribution, (FloatDistribution, IntDistribution)):
        raise ValueError(f"parameter {label!r} has a distribution it cannot draw: {distribution}")
    integer = isinstance(distribution, IntDistribution)
    low, high = float(distribution.low), float(distribution.high)
    return numeric_axis(label, low, high, log=distribution.log, integer=integer)


def numeric_axis(label: str, low: float, high: float, *, log: bool, integer: bool) -> Axis:
    """A range's axis, on a log scale when the space samples it so."""
    scale = math.log10 if log and low > 0 else float
    bottom, top = scale(low), scale(high)

    def position(value: Any) -> float:
        """0 to 1; a value beyond the axis' range (an outlier) stands at its end."""
        where = 0.5 if top == bottom else (scale(float(value)) - bottom) / (top - bottom)
        return min(max(where, 0.0), 1.0)

    ticks = [(position(tick), _number(tick, integer)) for tick in _ticks(low, high, log, integer)]
    return Axis(_wrap(label), position, ticks)


def fences(values: Sequence[float]) -> tuple[float, float]:
    """The range of ``values`` within Tukey's fences (1.5 interquartile ranges beyond the
    quartiles), so that one diverged trial does not squeeze all the others into a line; the
    whole range for fewer than 5 values."""
    ordered = sorted(values)
    if len(ordered) < 5:
        return ordered[0], ordered[-1]
    first, _, third = statistics.quantiles(ordered, n=4)
    spread = 1.5 * (third - first)
    inside = [value for value in ordered if first - spread <= value <= third + spread]
    return inside[0], inside[-1]


def _ticks(low: float, high: float, log: bool, integer: bool) -> list[float]:
    """At most 5 round values within [low, high]; both ends when fewer than 2 fall inside."""
    from matplotlib.ticker import LogLocator, MaxNLocator

    if high <= low:
        return [low]
    inside: list[float] = []
    if log and low > 0:
        for subs in ((1.0, 2.0, 5.0), (1.0,)):
            found = LogLocator(subs=subs).tick_values(low, high)
            inside = [float(v) for v in found if low * 0.999 <= v <= high * 1.001]
            if len(inside) <= 5:
                break
    else:
        found = MaxNLocator(nbins=4, integer=integer).tick_values(low, high)
        margin = (high - low) * 1e-9
        inside = [float(v) for v in found if low - margin <= v <= high + margin]
    return inside if len(inside) >= 2 else sorted({low, high, *inside})


def _number(value: float, integer: bool) -> str:
    return str(round(value)) if integer else f"{value:.3g}"


def _share(index: int, count: int) -> float:
    return 0.5 if count < 2 else index / (count - 1)


def _cut(text: str) -> str:
    return text if len(text) <= LABEL_WIDTH else text[: LABEL_WIDTH - 3] + "..."


def _wrap(label: str) -> str:
    """An axis' name on lines of about ``LABEL_WIDTH``, broken after dots and spaces."""
    if len(label) <= LABEL_WIDTH:
        return label
    import textwrap

    return textwrap.fill(label.replace(".", ". "), LABEL_WIDTH).replace(". ", ".")
