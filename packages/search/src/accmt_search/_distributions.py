"""One parameter of a search space: a fixed value, a float or int range, or a choice.

Each knows how to draw its value from an optuna trial (``sample``) and which values stand for
it when a space is checked before the first trial (``probes``: its ends, or every choice).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs

if TYPE_CHECKING:
    import optuna

# What optuna stores as a categorical choice; anything else is chosen through a label.
LABEL_TYPES = (type(None), bool, int, float, str)


@attrs.frozen
class Fixed:
    """The same value in every trial."""

    value: Any
    searched = False

    def sample(self, trial: optuna.trial.BaseTrial, name: str) -> Any:
        return self.value

    def probes(self) -> tuple[Any, ...]:
        return (self.value,)


@attrs.frozen
class FloatRange:
    """A float in [low, high], uniform or on a log scale, optionally in steps."""

    low: float
    high: float
    log: bool = False
    step: float | None = None
    searched = True

    def sample(self, trial: optuna.trial.BaseTrial, name: str) -> float:
        return trial.suggest_float(name, self.low, self.high, log=self.log, step=self.step)

    def probes(self) -> tuple[Any, ...]:
        return (self.low, self.high)


@attrs.frozen
class IntRange:
    """An int in [low, high], in steps of ``step``, optionally on a log scale."""

    low: int
    high: int
    step: int = 1
    log: bool = False
    searched = True

    def sample(self, trial: optuna.trial.BaseTrial, name: str) -> int:
        return trial.suggest_int(name, self.low, self.high, step=self.step, log=self.log)

    def probes(self) -> tuple[Any, ...]:
        return (self.low, self.high)


@attrs.frozen
class Choice:
    """One of ``values``, stored in the study by its label (the value itself when optuna can
    store it: None, bool, int, float or str)."""

    labels: tuple[Any, ...]
    values: tuple[Any, ...]
    searched = True

    @classmethod
    def of(cls, choices: Any) -> Choice:
        """From a list or tuple of values, or a mapping of label to value."""
        if isinstance(choices, Mapping):
            return cls(tuple(choices), tuple(choices.values()))
        return cls(tuple(choices), tuple(choices))

    def sample(self, trial: optuna.trial.BaseTrial, name: str) -> Any:
        label = trial.suggest_categorical(name, list(self.labels))
        return self.values[self.labels.index(label)]

    def probes(self) -> tuple[Any, ...]:
        return self.values


Distribution = Fixed | FloatRange | IntRange | Choice
