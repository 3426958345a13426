"""accmt 1.x's curriculum as a plain list of ``(max_step, dataset)`` stages, turned into
accmt-trainer's :class:`~accmt_trainer.StepsCurriculum` before anything is built."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from torch.utils.data import Dataset

from accmt_trainer import StepsCurriculum, TrainerConfigError

_LAST = -1
_WHERE = "Trainer.fit(train_dataset=[...])"
_FORM = (
    "a list is read as accmt 1.x's curriculum: (max_step, dataset) or (max_step, dataset, "
    "dataloader_kwargs) stages, max_step rising, -1 for the last to end at max_steps"
)


def meant_as_stages(train_dataset: Any) -> bool:
    """Whether ``train_dataset`` is a list (or tuple) meant as stages. A list of samples is a
    dataset to torch, so a list is read as stages only when it is empty, or something in it is
    a dataset or looks like a stage: a pair or triple that starts with a whole number or holds
    a dataset second."""
    if not isinstance(train_dataset, (list, tuple)):
        return False
    return not train_dataset or any(map(_meant_as_stage, train_dataset))


def listed_curriculum(listed: Sequence[Any], max_steps: int | None) -> StepsCurriculum:
    """The curriculum that ``listed`` stages describe; a list that is not right is refused
    here, naming the stage."""
    if not listed:
        raise TrainerConfigError(f"{_WHERE}: the list is empty; {_FORM}")
    stages = [_listed_stage(i, item, i == len(listed) - 1) for i, item in enumerate(listed)]
    if stages[-1][0] == _LAST:
        if max_steps is None:
            raise TrainerConfigError(
                f"{_WHERE}: the last stage's max_step is -1, which needs "
                "HyperParameters(max_steps=...)"
            )
        stages[-1] = (max_steps, *stages[-1][1:])
    curriculum, previous = StepsCurriculum(), 0
    for i, (end, dataset, kwargs) in enumerate(stages):
        if end <= previous:
            raise TrainerConfigError(
                f"{_WHERE}: stage {i}'s max_step {end} is not above the previous stage's "
                f"({previous}); {_FORM}"
            )
        curriculum.add(dataset, end - previous, kwargs)
        previous = end
    return curriculum


def _meant_as_stage(item: Any) -> bool:
    if isinstance(item, Dataset):
        return True
    return (
        isinstance(item, (tuple, list))
        and len(item) in (2, 3)
        and (_whole_number(item[0]) or isinstance(item[1], Dataset))
    )


def _listed_stage(index: int, item: Any, last: bool) -> tuple[int, Any, Any]:
    where = f"{_WHERE}: stage {index}"
    if not isinstance(item, (tuple, list)) or len(item) not in (2, 3):
        raise TrainerConfigError(f"{where} is {_shown(item)}; {_FORM}")
    end = item[0]
    if not _whole_number(end) or (end < 1 and not (last and end == _LAST)):
        hint = "" if last else " (-1 is for the last stage only)"
        raise TrainerConfigError(
            f"{where}: max_step must be a whole number of steps, at least 1{hint}, got "
            f"{_shown(end)}; {_FORM}"
        )
    return (end, item[1], item[2] if len(item) == 3 else None)


def _whole_number(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _shown(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 60 else text[:57] + '...'}"
