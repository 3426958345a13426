"""What ``best_metric_fn`` receives: one evaluation's results, by validation set."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import Any

from ._errors import MetricNameError


class SetMetrics(dict[str, float]):
    """One validation set's results: ``{"loss": 0.21, "accuracy": 0.95, ...}``."""

    def __init__(self, values: Mapping[str, float], key: str = "validation") -> None:
        super().__init__(values)
        self.key = key
        """The set's name."""

    def __missing__(self, name: str) -> float:
        raise MetricNameError(
            f"the objective reads metrics[{self.key!r}][{name!r}], but validation set "
            f"{self.key!r} reports only {sorted(self)}{_closest(name, self)}; validation_step "
            "returns the loss as 'loss' and each metric under its name"
        )


class EvaluationMetrics(dict[str, SetMetrics]):
    """One evaluation's results, by validation set: ``{"validation": {"loss": 0.21,
    "accuracy": 0.95}}``.

    The sets are named as the Trainer names them: ``"validation"`` for a single dataset, the
    keys of a dict of datasets. Each set holds ``"loss"`` (the mean validation loss) and one
    value per metric. Reading a set or a name that is not there raises
    :class:`MetricNameError` (a ``KeyError``) naming the closest.
    """

    def __init__(self, results: Mapping[str, Mapping[str, float]]) -> None:
        super().__init__({key: SetMetrics(values, key) for key, values in results.items()})

    def __missing__(self, key: str) -> SetMetrics:
        raise MetricNameError(
            f"the objective reads metrics[{key!r}], but the validation sets are "
            f"{sorted(self)}{_closest(key, self)}"
        )


def _closest(name: object, names: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest of ``names``, else ``""``: those the name begins
    (``acc`` for ``accuracy``), then difflib's closest, compared without case."""
    by_lower = {candidate.lower(): candidate for candidate in names}
    lower = str(name).lower()
    begun = [known for known in by_lower if lower and known.startswith(lower)]
    close = [*begun, *difflib.get_close_matches(lower, list(by_lower), n=2)]
    found = [repr(by_lower[known]) for known in dict.fromkeys(close)][:2]
    return f" (did you mean {' or '.join(found)}?)" if found else ""


def validation_loss(metrics: EvaluationMetrics) -> float:
    """The default objective: the validation loss (the mean over the sets, as the Trainer's
    ``best_valid_loss`` counts it)."""
    losses = [values["loss"] for values in metrics.values() if "loss" in values]
    if not losses:
        raise MetricNameError(
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
