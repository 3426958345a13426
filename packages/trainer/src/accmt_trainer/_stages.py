"""What ``Trainer.fit`` was given as training data: one dataset, or stages (a curriculum, or
accmt 1.x's plain list of ``(max_step, dataset)`` pairs), checked before anything is built."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeAlias

import attrs
from torch.utils.data import Dataset

from ._curriculum import (
    LAST,
    Curriculum,
    Stage,
    check_loader_kwargs,
    check_stage_dataset,
    whole_number,
)
from ._errors import TrainerConfigError

TrainData: TypeAlias = (
    "Dataset[Any] | Curriculum | Sequence[tuple[int, Any] | tuple[int, Any, Mapping[str, Any]]]"
)
"""What ``Trainer.fit`` trains on: a dataset, a curriculum, or a list of stages."""

_WHERE = "Trainer.fit(train_dataset=[...])"
_FORM = (
    "a list is read as accmt 1.x's curriculum: (max_step, dataset) or (max_step, dataset, "
    "dataloader_kwargs) stages, max_step rising, -1 for the last to end at max_steps"
)


@attrs.frozen
class Stages:
    """Training data in stages, checked: ``(max_step, dataset, dataloader_kwargs)`` each."""

    stages: tuple[Stage, ...]

    @property
    def end_steps(self) -> list[int]:
        return [end for end, _, _ in self.stages]


def training_data(train_dataset: Any, max_steps: int | None) -> Any:
    """``train_dataset`` itself when it is one dataset, else the :class:`Stages` it
    describes; a list meant as stages but not right is refused here, before anything is built.

    A list of samples is a dataset to torch, so a list is read as stages only when something
    in it is a dataset or looks like a stage: a pair or triple that starts with a whole number
    or holds a dataset second."""
    if isinstance(train_dataset, Curriculum):
        return Stages(tuple(train_dataset.stages(max_steps)))
    if isinstance(train_dataset, (list, tuple)) and (
        not train_dataset or any(map(_meant_as_stage, train_dataset))
    ):
        return Stages(tuple(_listed_stages(train_dataset, max_steps)))
    return train_dataset


def _meant_as_stage(item: Any) -> bool:
    if isinstance(item, Dataset):
        return True
    return (
        isinstance(item, (tuple, list))
        and len(item) in (2, 3)
        and (whole_number(item[0]) or isinstance(item[1], Dataset))
    )


def _listed_stages(listed: Sequence[Any], max_steps: int | None) -> list[Stage]:
    if not listed:
        raise TrainerConfigError(f"{_WHERE}: the list is empty; {_FORM}")
    stages = [_listed_stage(i, item, i == len(listed) - 1) for i, item in enumerate(listed)]
    if stages[-1][0] == LAST:
        if max_steps is None:
            raise TrainerConfigError(f"{_WHERE}: the last stage's max_step is -1, which needs "
                                     "HyperParameters(max_steps=...)")  # fmt: skip
        stages[-1] = (max_steps, *stages[-1][1:])
    previous = 0
    for i, (end, _, _) in enumerate(stages):
        if end <= previous:
            raise TrainerConfigError(f"{_WHERE}: stage {i}'s max_step {end} is not above the "
                                     f"previous stage's ({previous}); {_FORM}")  # fmt: skip
        previous = end
    if max_steps is not None and previous != max_steps:
        raise TrainerConfigError(f"{_WHERE}: the stages end at step {previous}, but max_steps is "
                                 f"{max_steps}; they must end at max_steps")  # fmt: skip
    return stages


def _listed_stage(index: int, item: Any, last: bool) -> Stage:
    where = f"{_WHERE}: stage {index}"
    if not isinstance(item, (tuple, list)) or len(item) not in (2, 3):
        raise TrainerConfigError(f"{where} is {_shown(item)}; {_FORM}")
    end, dataset = item[0], item[1]
    if not whole_number(end) or (end < 1 and not (last and end == LAST)):
        hint = "" if last else " (-1 is for the last stage only)"
        raise TrainerConfigError(
            f"{where}: max_step must be a whole number of steps, at least 1{hint}, got "
            f"{_shown(end)}; {_FORM}"
        )
    check_stage_dataset(where, dataset)
    kwargs = check_loader_kwargs(where, item[2] if len(item) == 3 else None)
    return (end, dataset, kwargs)


def _shown(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 60 else text[:57] + '...'}"
