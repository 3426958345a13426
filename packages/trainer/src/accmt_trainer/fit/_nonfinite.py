"""Watching the training loss for NaN and infinity without a host sync on every step.

Each step copies its loss into a buffer on the device (no sync, and nothing allocated that
outlives the step: see ``LossWindow``), which doubles when full. The buffer is checked at the
boundaries that sync anyway: a log, an evaluation, a checkpoint, a best model. Before anything
is written, the model's parameters are checked too, so that nothing non-finite reaches the disk.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable
from typing import Literal

import torch
from accelerate import Accelerator

from .._errors import NonFiniteLossError
from ..evaluation import scalar

NonFinitePolicy = Literal["error", "warn", "skip"]
NONFINITE_POLICIES: tuple[NonFinitePolicy, ...] = ("error", "warn", "skip")
_NONE = 2**62


class NonFiniteGuard:
    """``policy``: ``"error"`` stops the run at the first boundary after a non-finite loss,
    ``"warn"`` warns there and trains on, ``"skip"`` is handled by the optimizer step (it skips
    the step whose gradients are not finite) and only keeps non-finite losses out of the logs."""

    def __init__(self, policy: NonFinitePolicy, accelerator: Accelerator) -> None:
        self.policy = policy
        self._accelerator = accelerator
        self._losses = torch.empty(64, dtype=torch.float64, device=accelerator.device)
        """The losses since the last check, the first ``len(_steps)`` entries."""
        self._steps: list[int] = []

    def add(self, loss: torch.Tensor, step: int) -> bool:
        """Note the loss of a batch of optimizer step ``step``; whether it may be logged.

        Only ``"skip"`` looks at the value now (one host sync per batch, the price of skipping).
        """
        if self.policy == "skip":
            return bool(torch.isfinite(loss))
        held = len(self._steps)
        if held == len(self._losses):
            self._losses = torch.cat([self._losses, torch.empty_like(self._losses)])
        self._losses[held] = scalar(loss)
        self._steps.append(step)
        return True

    def check_logged_mean(self, mean: float | None) -> None:
        """At a log: ``mean``, the loss window's mean over every process, is already global, so
        a non-finite one tells every process alike that a loss since the last log was."""
        losses, steps = self._take()
        if mean is None or math.isfinite(mean):
            return
        first = _first_step(losses, steps)
        # Another process's loss was the bad one: this one knows only the window.
        self._act(first if first is not None else (steps[0] if steps else -1))

    def check(self, parameters: Iterable[torch.Tensor] | None = None) -> None:
        """At an evaluation, a checkpoint or a best model: the losses since the last check, on
        every process (one small gather), and the ``parameters`` about to be written."""
        if self.policy == "skip":
            return
        losses, steps = self._take()
        local = _first_step(losses, steps)
        found = self._accelerator.gather(
            torch.tensor([_NONE if local is None else local], device=self._accelerator.device)
        )
        first = int(found.min())
        if first == _NONE and parameters is not None and not _all_finite(parameters):
            first = -1
        if first != _NONE:
            self._act(first)

    def _take(self) -> tuple[torch.Tensor, list[int]]:
        steps, self._steps = self._steps, []
        return self._losses[: len(steps)], steps

    def _act(self, first: int) -> None:
        message = (
            f"the training loss became NaN or infinite at optimizer step {first}"
            if first >= 0
            else "the model's parameters became NaN or infinite"
        )
        if self.policy == "warn":
            warnings.warn(f"{message}; training goes on (on_nonfinite_loss='warn')", stacklevel=4)
            return
        raise NonFiniteLossError(
            f"{message}. The run stops before any checkpoint or best model is written from "
            "non-finite weights. Lower the learning rate, clip gradients (clip_grad=...), or pass "
            "Trainer(on_nonfinite_loss='skip') to skip such steps, or 'warn' to train on.",
            first,
        )


def _first_step(losses: torch.Tensor, steps: list[int]) -> int | None:
    """The step of the first non-finite loss (one local host sync), or None."""
    if not steps:
        return None
    bad = ~torch.isfinite(losses)
    return steps[int(bad.nonzero()[0, 0])] if bool(bad.any()) else None


def _all_finite(parameters: Iterable[torch.Tensor]) -> bool:
    finite = [torch.isfinite(parameter).all() for parameter in parameters]
    return not finite or bool(torch.stack(finite).all())
