"""When checkpoints are taken: ``checkpoint_every`` parsed once into a small value."""

from __future__ import annotations

import re
from typing import Literal

import attrs

from .._errors import TrainerConfigError

Unit = Literal["epoch", "step", "eval"]

_UNITS: dict[str, Unit] = {
    "ep": "epoch",
    "epoch": "epoch",
    "epochs": "epoch",
    "st": "step",
    "step": "step",
    "steps": "step",
    "eval": "eval",
    "evals": "eval",
    "evaluation": "eval",
    "evaluations": "eval",
}
_PATTERN = re.compile(r"^\s*(\d*)\s*([a-z]+)\s*$")


@attrs.frozen
class CheckpointSchedule:
    """Take a checkpoint every ``every`` epochs, optimizer steps or evaluations."""

    every: int
    unit: Unit

    def due(self, unit: Unit, count: int) -> bool:
        """Whether the ``count``-th epoch, step or evaluation (by ``unit``) takes one."""
        return unit == self.unit and count % self.every == 0


def parse_checkpoint_every(value: str | None) -> CheckpointSchedule | None:
    """``"epoch"``, ``"2ep"``, ``"500 steps"``, ``"eval"`` (or None: no checkpoints)."""
    if value is None:
        return None
    match = _PATTERN.match(value.lower()) if isinstance(value, str) else None
    unit = _UNITS.get(match.group(2)) if match else None
    every = int(match.group(1) or 1) if match else 0
    if unit is None or every < 1:
        raise TrainerConfigError(
            f"Trainer(checkpoint_every=...): expected a count and a unit such as 'epoch', "
            f"'2ep', '500 steps' or 'eval', or None; got {value!r}"
        )
    return CheckpointSchedule(every, unit)
