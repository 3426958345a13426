"""What ``best_metric_fn`` receives: one evaluation's results, by validation set."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class SetMetrics(dict[str, float]):
    """One validation set's results: ``{"loss": 0.21, "accuracy": 0.95, ...}``."""


class EvaluationMetrics(dict[str, SetMetrics]):
    """One evaluation's results, by validation set: ``{"validation": {"loss": 0.21,
    "accuracy": 0.95}}``.

    The sets are named as the Trainer names them: ``"validation"`` for a single dataset, the
    keys of a dict of datasets. Each set holds ``"loss"`` (the mean validation loss) and one
    value per metric.
    """

    def __init__(self, results: Mapping[str, Mapping[str, float]]) -> None:
        super().__init__({key: SetMetrics(values) for key, values in results.items()})


def validation_loss(metrics: EvaluationMetrics) -> float:
    """The default objective: the validation loss (the mean over the sets, as the Trainer's
    ``best_valid_loss`` counts it)."""
    losses = [values["loss"] for values in metrics.values() if "loss" in values]
    if not losses:
        raise KeyError(
            "the evaluation has no validation loss: validation_step must return the loss (a "
            "tensor, or a dict with 'loss'), or pass best_metric_fn"
        )
    return sum(losses) / len(losses)


def objective_value(value: Any) -> float:
    """``best_metric_fn``'s result as a float; a TypeError names what it returned instead."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        item = getattr(value, "item", None)
        if item is None:
            raise TypeError(f"best_metric_fn must return a number, got {value!r}")
        value = item()
    return float(value)
