"""The search's plots, read back from their matplotlib figures: what the axes say, how many
trials they draw, and labels that neither overlap nor leave the figure."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import optuna
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure
from matplotlib.text import Text
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.trial import TrialState, create_trial

from accmt_search._parallel_coordinates import parallel_figure
from accmt_search._plots import history_figure, importances_figure, write_plots
from accmt_search._study import RECORD, objective_name

DISTRIBUTIONS: dict[str, Any] = {
    "optimizer_kwargs.lr": FloatDistribution(1e-4, 3e-2, log=True),
    "optimizer_kwargs.weight_decay": FloatDistribution(0.0, 0.05),
    "batch_size": CategoricalDistribution(("32", "64", "128")),
    "scheduler": CategoricalDistribution(("LinearWithWarmup", "CosineWithWarmup")),
    "module.hidden": IntDistribution(32, 256, step=32),
}
OBJECTIVE = "validation accuracy"


def params(index: int) -> dict[str, Any]:
    return {
        "optimizer_kwargs.lr": 1e-4 * 1.3**index,
        "optimizer_kwargs.weight_decay": 0.05 * (index % 7) / 7,
        "batch_size": ("32", "64", "128")[index % 3],
        "scheduler": ("LinearWithWarmup", "CosineWithWarmup")[index % 2],
        "module.hidden": 32 * (1 + index % 8),
    }


@pytest.fixture
def study() -> optuna.Study:
    """20 trials: 7 complete (one diverged, at 0.1), 12 pruned at their second of 4
    evaluations, 1 failed by its own error."""
    made = optuna.create_study(direction="maximize")
    for index in range(20):
        curve = {step: 0.5 + 0.02 * index + 0.05 * step for step in range(1, 5)}
        kind = "complete" if index % 3 == 0 else "pruned"
        options: dict[str, Any] = {"params": params(index), "distributions": DISTRIBUTIONS}
        if index == 19:
            failed = {RECORD: {"outcome": "failed"}}
            trial = create_trial(state=TrialState.FAIL, user_attrs=failed, **options)
        elif kind == "complete":
            value = 0.1 if index == 3 else curve[4]
            trial = create_trial(value=value, intermediate_values=curve, **options)
        else:
            stopped = {step: curve[step] for step in (1, 2)}
            trial = create_trial(state=TrialState.PRUNED, intermediate_values=stopped, **options)
        made.add_trial(trial)
    return made


def drawn(figure: Figure) -> Any:
    canvas = FigureCanvasAgg(figure)
    canvas.draw()
    return canvas.get_renderer()


def marks(ax: Any, gid: str) -> int:
    """Points drawn by the scatters of one kind (a trial beyond the range shown included)."""
    return sum(len(c.get_offsets()) for c in ax.collections if c.get_gid() == gid)


def test_the_history_names_the_objective_and_shows_pruned_trials(study: optuna.Study) -> None:
    figure = history_figure(study.get_trials(), maximize=True, objective=OBJECTIVE)
    history, curves = figure.axes
    assert history.get_ylabel() == OBJECTIVE
    assert curves.get_ylabel() == OBJECTIVE
    assert (marks(history, "complete"), marks(history, "pruned"), marks(history, "failed")) == (
        7,
        12,
        1,
    )
    # The diverged trial stands at the edge with its value, not squeezing the rest into a line.
    assert history.get_ylim()[0] > 0.5
    assert "0.1" in [text.get_text() for text in history.texts]
    # Each trial's evaluations: a curve per trial with a value, the pruned ones ended by a cross.
    assert len([line for line in curves.get_lines() if len(line.get_xdata()) > 0]) == 19
    assert sum(len(c.get_offsets()) for c in curves.collections) == 12


def overlaps(texts: list[Text], renderer: Any) -> list[tuple[str, str]]:
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in texts if t.get_text()]
    return [
        (a, b)
        for index, (a, box) in enumerate(boxes)
        for b, other in boxes[index + 1 :]
        if box.overlaps(other)
    ]


def test_the_parallel_plot_is_readable(study: optuna.Study) -> None:
    figure = parallel_figure(study.get_trials(), maximize=True, objective=OBJECTIVE)
    ax = figure.axes[0]
    renderer = drawn(figure)
    labels = [label.get_text() for label in ax.get_xticklabels()]
    assert labels == [
        "lr",
        "weight_decay",
        "batch_size",
        "scheduler",
        "hidden",
        "validation\naccuracy",
    ]
    lines = {
        gid: [line for line in ax.get_lines() if line.get_gid() == gid]
        for gid in ("complete", "best", "pruned")
    }
    assert (len(lines["complete"]) + len(lines["best"]), len(lines["pruned"])) == (7, 12)
    # Tick labels of every axis, the axes' names: none overlaps another, none leaves the figure.
    texts = [*ax.texts, *ax.get_xticklabels()]
    assert overlaps(texts, renderer) == []
    figure_box = figure.bbox
    for text in [*texts, figure.axes[1].yaxis.label, ax.title]:
        box = text.get_window_extent(renderer)
        assert figure_box.x0 <= box.x0, text.get_text()
        assert box.x1 <= figure_box.x1, text.get_text()
        assert figure_box.y0 <= box.y0, text.get_text()
        assert box.y1 <= figure_box.y1, text.get_text()
    # On white, every line is dark enough to see.
    assert to_rgb(ax.get_facecolor()) == (1.0, 1.0, 1.0)
    for line in lines["complete"] + lines["best"]:
        red, green, blue = to_rgb(line.get_color())
        assert 0.2126 * red + 0.7152 * green + 0.0722 * blue < 0.8, line.get_color()
    assert figure.axes[1].get_ylabel() == OBJECTIVE  # the colour bar


def test_importances_name_the_objective(study: optuna.Study) -> None:
    figure = importances_figure(study, OBJECTIVE)
    assert OBJECTIVE in figure.axes[0].get_xlabel()
    assert len(figure.axes[0].patches) == len(DISTRIBUTIONS)


def test_write_plots_writes_each_png(study: optuna.Study, tmp_path: Path) -> None:
    written = write_plots(study, tmp_path, OBJECTIVE)
    assert [path.name for path in written] == [
        "optimization_history.png",
        "param_importances.png",
        "parallel_coordinate.png",
    ]
    assert all(path.stat().st_size > 10_000 for path in written)


def test_the_objective_name_is_kept_in_the_study(study: optuna.Study) -> None:
    assert objective_name(study, None) == "objective"  # nothing read it yet
    assert objective_name(study, OBJECTIVE) == OBJECTIVE
    assert objective_name(study, None) == OBJECTIVE  # a later run that trains no trial
