"""A running mean of losses kept on the device, read once per log or epoch."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
import torch
from accelerate import Accelerator

Items = int | torch.Tensor
"""How many items (tokens, samples) a summed loss is over: an int, or a 0-dim tensor."""


@attrs.frozen
class LossTotals:
    """A window's sums over every process."""

    total: float
    """The losses added up."""
    weight: float
    """What ``total`` is the mean over: 1 per mean loss, plus the items of the summed ones."""
    losses: int
    """How many losses were added."""

    @property
    def mean(self) -> float | None:
        """``total / weight``; None when there is no weight (no loss, or items adding up to 0)."""
        return self.total / self.weight if self.weight else None


class LossWindow:
    """A running sum of losses kept on the device: adding costs no host sync; reading does one.

    A plain loss is a mean and weighs 1; a summed loss comes with the number of items it sums,
    and the window's mean is then the mean over those items (a token-weighted loss). Each loss
    (and tensor item count) is added in place to the sums, which are made with the window:
    nothing a step allocates outlives it. Keeping the steps' scalars in a list instead (an
    append costs a tenth of a microsecond where an in-place add costs a few) kept hundreds of
    small blocks alive, each allocated in the middle of a step beside its logits: the heap
    could no longer join the space the step's large blocks freed, and grew by 100-250 MiB
    over a run of a small GPT-2 with token-weighted losses (benchmarks/lm.py, ``tokens``).
    """

    def __init__(self, device: torch.device) -> None:
        self.total = torch.zeros((), device=device, dtype=torch.float64)
        self.count = 0
        """The weight added as Python numbers: plain losses, and items given as ints."""
        self.losses = 0
        """How many losses were added since the window was made or reduced; not in the
        checkpoints (fit reads its windows' means only: a validation set's is never saved)."""
        self.items = torch.zeros((), device=device, dtype=torch.float64)
        """The weight added as tensors (items given as 0-dim tensors)."""

    def add(self, loss: torch.Tensor, items: Items | None = None) -> None:
        """A batch's ``loss``: a mean (``items`` None), or a sum over ``items`` items. A
        one-element tensor of any shape is taken as its value."""
        self.total.add_(scalar(loss))
        self.losses += 1
        if items is None:
            self.count += 1
        elif isinstance(items, torch.Tensor):
            self.items.add_(scalar(items))
        else:
            self.count += items

    def state_dict(self) -> dict[str, Any]:
        return {
            "total": self.total.detach().cpu(),
            "count": self.count,
            "items": self.items.detach().cpu(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.total.copy_(state["total"])
        self.count = int(state["count"])
        # A checkpoint written before summed losses had no tensor weight.
        self.items.copy_(state.get("items", torch.zeros((), dtype=torch.float64)))

    def reduce_mean(self, accelerator: Accelerator) -> float | None:
        """The mean over this window on every process, then resets the window."""
        return self.reduce(accelerator).mean

    def reduce(self, accelerator: Accelerator) -> LossTotals:
        """This window's sums on every process (summed, never averaged: exact whatever the
        processes' shares), then resets the window."""
        weight = self.items + self.count
        losses = torch.full((), self.losses, dtype=torch.float64, device=self.total.device)
        summed = accelerator.reduce(torch.stack([self.total, weight, losses]), reduction="sum")
        self.total.zero_()
        self.items.zero_()
        self.count = self.losses = 0
        total, weight_sum, added = (float(x) for x in summed.tolist())
        return LossTotals(total, weight_sum, int(added))


def scalar(value: torch.Tensor) -> torch.Tensor:
    """A one-element tensor as a 0-dim one, for an in-place add to a 0-dim sum."""
    return value if value.ndim == 0 else value.reshape(())


@attrs.frozen
class TrainingLosses:
    """One process's training loss windows: since the last log, and over the epoch. Each
    checkpoint holds every process's own (``process_<rank>.safetensors``)."""

    since_log: LossWindow
    epoch: LossWindow

    @classmethod
    def on(cls, device: torch.device) -> TrainingLosses:
        return cls(LossWindow(device), LossWindow(device))

    def state_dict(self) -> dict[str, Any]:
        return {"window": self.since_log.state_dict(), "epoch": self.epoch.state_dict()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.since_log.load_state_dict(state["window"])
        self.epoch.load_state_dict(state["epoch"])
