"""What ``Trainer.fit`` was given as training data: one dataset, or the stages of a curriculum,
checked before anything is built."""

from __future__ import annotations

from typing import Any, TypeAlias

import attrs
from torch.utils.data import Dataset

from ._curriculum import Curriculum, Stage

TrainData: TypeAlias = "Dataset[Any] | Curriculum"
"""What ``Trainer.fit`` trains on: a dataset, or a curriculum."""


@attrs.frozen
class Stages:
    """Training data in stages, checked: ``(max_step, dataset, dataloader_kwargs)`` each."""

    stages: tuple[Stage, ...]

    @property
    def end_steps(self) -> list[int]:
        return [end for end, _, _ in self.stages]


def training_data(train_dataset: Any, max_steps: int | None) -> Any:
    """``train_dataset`` itself when it is one dataset (a list of samples too), else the
    :class:`Stages` of the curriculum it is, checked against ``max_steps``."""
    if isinstance(train_dataset, Curriculum):
        return Stages(tuple(train_dataset.stages(max_steps)))
    return train_dataset
