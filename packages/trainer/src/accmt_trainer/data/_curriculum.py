"""Curriculum learning: datasets trained on one after another, each until the run's
optimizer step reaches the end of its stage.

Each class collects stages with ``add(dataset, <size>, dataloader_kwargs=None)`` and turns them into
cumulative ``(max_step, dataset, dataloader_kwargs)`` stages with :meth:`stages`, which
``Trainer.fit`` trains one after another, resuming exactly within a stage. Everything that can be
checked when a stage is added is checked there, naming the stage; what needs ``max_steps`` is
checked by ``stages``, which ``fit`` calls before the first step.
"""

from __future__ import annotations

import abc
import math
from collections.abc import Mapping
from typing import Any

from .._errors import TrainerConfigError
from ..config import check_mapping
from ._checks import check_not_empty

Stage = tuple[int, Any, dict[str, Any]]
"""A stage as ``fit`` reads it: the global step at which it ends, its dataset, and keyword
arguments for its DataLoader."""

LAST = -1
"""The size that gives the last stage whatever steps are left up to ``max_steps``."""
# RangeCurriculum.add's parameter is named `range` (its keyword); the built-in under another
# name.
_RANGE = range
# Ratios are added up in floating point: 0.1 + 0.2 + 0.7 must count as a whole.
_RATIO_TOLERANCE = 1e-9


def check_stage_dataset(where: str, dataset: Any) -> None:
    """A stage's dataset is map-style (a length and items) and not empty."""
    sized = hasattr(dataset, "__len__") and hasattr(dataset, "__getitem__")
    if not sized or isinstance(dataset, (str, bytes, Mapping)):
        raise TrainerConfigError(
            f"{where}: expected a map-style dataset (with __len__ and __getitem__), got "
            f"{type(dataset).__name__}"
        )
    check_not_empty(dataset, f"{where}: the dataset")


def check_loader_kwargs(where: str, kwargs: Any) -> dict[str, Any]:
    """A stage's DataLoader keyword arguments: a dict with string keys, or None."""
    return check_mapping("dataloader_kwargs", kwargs, where=where)


def whole_number(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class Curriculum(abc.ABC):
    """The base of the curricula: datasets in the order they are added, each with the
    DataLoader keyword arguments that override the Trainer's for it."""

    def __init__(self) -> None:
        self.data: list[Any] = []
        self.dataloader_kwargs: list[dict[str, Any]] = []

    def __len__(self) -> int:
        return len(self.data)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({len(self)} stages)"

    def stages(self, max_steps: int | None) -> list[Stage]:
        """The stages as cumulative ``(max_step, dataset, dataloader_kwargs)``: stage ``i``
        trains while the global optimizer step is below its ``max_step``. ``max_steps`` is the
        run's (``HyperParameters.max_steps``); the stages must end exactly there."""
        if not self.data:
            raise TrainerConfigError(f"{type(self).__name__} has no stages; add(...) one first")
        ends = self._end_steps(max_steps)
        if max_steps is not None and ends[-1] != max_steps:
            raise TrainerConfigError(
                f"{type(self).__name__}: the stages end at step {ends[-1]}, but max_steps is "
                f"{max_steps}; they must end at max_steps"
            )
        return list(zip(ends, self.data, self.dataloader_kwargs, strict=True))

    @abc.abstractmethod
    def _end_steps(self, max_steps: int | None) -> list[int]:
        """The global step at which each stage ends."""

    def _append(self, dataset: Any, dataloader_kwargs: Any) -> None:
        where = self._where(len(self.data))
        check_stage_dataset(where, dataset)
        self.dataloader_kwargs.append(check_loader_kwargs(where, dataloader_kwargs))
        self.data.append(dataset)

    def _where(self, stage: int) -> str:
        return f"{type(self).__name__} stage {stage}"


class StepsCurriculum(Curriculum):
    """Each dataset for a number of optimizer steps; ``-1`` for the last one gives it the steps
    left up to ``max_steps``."""

    def __init__(self) -> None:
        super().__init__()
        self.steps_per_data: list[int] = []

    def add(
        self, dataset: Any, steps: int, dataloader_kwargs: dict[str, Any] | None = None
    ) -> None:
        """Train on ``dataset`` for ``steps`` optimizer steps (``-1``: the rest, last only)."""
        where = self._where(len(self.data))
        if not whole_number(steps) or (steps < 1 and steps != LAST):
            raise TrainerConfigError(
                f"{where}: steps must be at least 1, or -1 for the steps "
                f"left (last stage only), got {steps!r}"
            )
        _refuse_after_last(where, self.steps_per_data)
        self._append(dataset, dataloader_kwargs)
        self.steps_per_data.append(steps)

    def _end_steps(self, max_steps: int | None) -> list[int]:
        sizes = list(self.steps_per_data)
        if sizes[-1] == LAST:
            before = sum(sizes[:-1])
            left = _needs_max_steps(self._where(len(sizes) - 1), max_steps) - before
            if left < 1:
                raise TrainerConfigError(
                    f"{self._where(len(sizes) - 1)}: -1 takes the steps left, but the stages "
                    f"before it already reach step {before} of max_steps={max_steps}"
                )
            sizes[-1] = left
        ends = [sum(sizes[: i + 1]) for i in range(len(sizes))]
        return _within(type(self).__name__, ends, max_steps)


class RatioCurriculum(Curriculum):
    """Each dataset for a share of ``max_steps``; the shares add up to 1, or the last one is
    ``-1`` (the share left). Stage ends are rounded to whole steps."""

    def __init__(self) -> None:
        super().__init__()
        self.ratios: list[float] = []

    def add(
        self, dataset: Any, ratio: float, dataloader_kwargs: dict[str, Any] | None = None
    ) -> None:
        """Train on ``dataset`` for ``ratio`` of ``max_steps`` (``-1``: the rest, last only)."""
        where = self._where(len(self.data))
        numeric = isinstance(ratio, (int, float)) and not isinstance(ratio, bool)
        if not numeric or not (ratio == LAST or 0 < ratio <= 1):
            raise TrainerConfigError(
                f"{where}: ratio must be in (0, 1], or -1 for the share "
                f"left (last stage only), got {ratio!r}"
            )
        _refuse_after_last(where, self.ratios)
        total = math.fsum(self.ratios) + (0 if ratio == LAST else ratio)
        if total > 1 + _RATIO_TOLERANCE:
            raise TrainerConfigError(
                f"{where}: ratio {ratio!r} brings the ratios to {total:g}; they may add up to 1"
            )
        if ratio == LAST and total >= 1 - _RATIO_TOLERANCE:
            raise TrainerConfigError(
                f"{where}: -1 takes the share left, but the ratios before it already add up to 1"
            )
        self._append(dataset, dataloader_kwargs)
        self.ratios.append(float(ratio))

    def _end_steps(self, max_steps: int | None) -> list[int]:
        name = type(self).__name__
        total_steps = _needs_max_steps(name, max_steps)
        shares = self.ratios[:-1] if self.ratios[-1] == LAST else self.ratios
        if self.ratios[-1] != LAST and math.fsum(shares) < 1 - _RATIO_TOLERANCE:
            raise TrainerConfigError(
                f"{name}: the ratios add up to {math.fsum(shares):g}; "
                "they must add up to 1, or the last must be -1"
            )
        # The last stage ends at max_steps exactly; the others at their rounded share.
        ends = [round(math.fsum(shares[: i + 1]) * total_steps) for i in range(len(shares))]
        ends[len(self.ratios) - 1 :] = [total_steps]
        for stage, (start, end) in enumerate(zip([0, *ends], ends, strict=False)):
            if end <= start:
                ratio = self.ratios[stage]
                raise TrainerConfigError(
                    f"{self._where(stage)}: ratio {ratio!r} of max_steps={total_steps} is "
                    "less than one step"
                )
        return ends


class RangeCurriculum(Curriculum):
    """Each dataset for a range of global steps: ``range(0, 100)``, then ``range(100, 250)``...
    The ranges follow one another from step 0, and the last one ends at ``max_steps``."""

    def __init__(self) -> None:
        super().__init__()
        self.ranges: list[range] = []

    def add(
        self, dataset: Any, range: range, dataloader_kwargs: dict[str, Any] | None = None
    ) -> None:
        """Train on ``dataset`` while the global step is in ``range``."""
        steps = range
        where = self._where(len(self.data))
        if not isinstance(steps, _RANGE):
            raise TrainerConfigError(f"{where}: expected a range of steps, got {steps!r}")
        start = self.ranges[-1].stop if self.ranges else 0
        if steps.step != 1 or steps.start != start or steps.stop <= steps.start:
            raise TrainerConfigError(
                f"{where}: expected range({start}, <stop above {start}>), a step of 1 starting "
                f"where the stage before ends, got {steps!r}"
            )
        self._append(dataset, dataloader_kwargs)
        self.ranges.append(steps)

    def _end_steps(self, max_steps: int | None) -> list[int]:
        return _within(type(self).__name__, [r.stop for r in self.ranges], max_steps)


def _refuse_after_last(where: str, sizes: list[Any]) -> None:
    if sizes and sizes[-1] == LAST:
        raise TrainerConfigError(
            f"{where}: the stage before it is -1 (the steps left), which must be the last stage"
        )


def _needs_max_steps(where: str, max_steps: int | None) -> int:
    if max_steps is None:
        raise TrainerConfigError(
            f"{where}: sizes relative to the run (-1, ratios) need max_steps; set "
            "HyperParameters(max_steps=...)"
        )
    return max_steps


def _within(name: str, ends: list[int], max_steps: int | None) -> list[int]:
    if max_steps is not None and ends[-1] > max_steps:
        raise TrainerConfigError(
            f"{name}: the stages reach step {ends[-1]}, past max_steps={max_steps}"
        )
    return ends
