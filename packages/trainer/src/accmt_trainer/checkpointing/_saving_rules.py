"""Best-model saving rules: which value to watch, which way is better, when to save.

A rule names one value or several joined by ``/``, each all of which must improve:

- ``best_valid_loss`` (or ``valid_loss``): the validation loss (the mean over sets);
- ``best_train_loss`` (or ``train_loss``): the mean training loss of the last epoch;
- ``accuracy``: that metric, averaged over the validation sets that report it;
- ``accuracy@set_a``: that metric on one set;
- ``accuracy@set_a/f1@set_b``: both must improve.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import attrs

from accmt_state import TrainingState

from .._errors import TrainerConfigError

VALID_LOSS = "valid_loss"
TRAIN_LOSS = "train_loss"


@attrs.frozen
class Watched:
    """One value a rule watches: a metric, optionally on one validation set."""

    metric: str
    dataset: str | None

    @property
    def key(self) -> str:
        return self.metric if self.dataset is None else f"{self.metric}@{self.dataset}"


@attrs.frozen
class SavingRule:
    """A registered rule and its thresholds; its best values live in the TrainingState."""

    name: str
    watched: tuple[Watched, ...]
    saving_above: float | None = None
    saving_below: float | None = None

    @property
    def folder(self) -> str:
        """The folder under model_path that holds this rule's best model."""
        return self.name.replace("/", "__")

    @property
    def uses_train_loss(self) -> bool:
        return any(part.metric == TRAIN_LOSS for part in self.watched)

    def values(self, state: TrainingState, last_train_loss: float | None) -> dict[str, float]:
        """The current value of each watched part, by its key."""
        return {part.key: _value(part, state, last_train_loss) for part in self.watched}

    def improves(
        self,
        values: Mapping[str, float],
        best: Mapping[str, float],
        greater_is_better: Callable[[str], bool],
    ) -> bool:
        """Whether every part beats its best so far and every threshold is passed."""
        for part in self.watched:
            value, higher = values[part.key], greater_is_better(part.metric)
            if math.isnan(value):
                return False
            previous = best.get(part.key)
            if previous is not None and not (value > previous if higher else value < previous):
                return False
            if self.saving_above is not None and not value > self.saving_above:
                return False
            if self.saving_below is not None and not value < self.saving_below:
                return False
        return True


def parse_rule(
    rule: str, saving_above: float | None = None, saving_below: float | None = None
) -> SavingRule:
    """Parse ``rule``; errors name the rule and the bad part."""
    if not isinstance(rule, str) or not rule.strip():
        raise TrainerConfigError(
            "register_model_saving: expected a rule such as 'best_valid_loss' or "
            f"'accuracy@set_a', got {rule!r}"
        )
    parts = []
    for text in rule.split("/"):
        metric, at, dataset = text.strip().partition("@")
        metric = metric.removeprefix("best_")
        if metric in ("loss", "valid_loss", "validation_loss"):
            metric = VALID_LOSS
        if not metric or (at and not dataset):
            raise TrainerConfigError(
                f"register_model_saving({rule!r}): {text!r} is not '<metric>' or "
                "'<metric>@<validation set>'"
            )
        if metric == TRAIN_LOSS and dataset:
            raise TrainerConfigError(
                f"register_model_saving({rule!r}): the train loss belongs to no validation set"
            )
        parts.append(Watched(metric, dataset or None))
    return SavingRule(rule, tuple(parts), saving_above, saving_below)


def _value(part: Watched, state: TrainingState, last_train_loss: float | None) -> float:
    if part.metric == TRAIN_LOSS:
        return math.nan if last_train_loss is None else last_train_loss
    results = state.additional_metrics
    name = "loss" if part.metric == VALID_LOSS else part.metric
    if part.dataset is not None:
        if part.dataset not in results or name not in results[part.dataset]:
            raise TrainerConfigError(
                f"model saving rule watches {part.key!r}, but the evaluation reported "
                f"{ {key: sorted(values) for key, values in results.items()} }"
            )
        return float(results[part.dataset][name])
    found = [float(values[name]) for values in results.values() if name in values]
    if not found:
        raise TrainerConfigError(
            f"model saving rule watches {part.metric!r}, but no validation set reported it; "
            f"they reported { {key: sorted(values) for key, values in results.items()} }"
        )
    return sum(found) / len(found)
