"""One validation set's loss: the mean of its batches' mean losses, or token-weighted."""

from __future__ import annotations

import math

import torch
from accelerate import Accelerator

from .._errors import StepOutputError
from ._loss_window import Items, LossWindow


class SetLoss:
    """The loss of one validation set over every process.

    Batches that return a mean loss weigh 1 each, as before summed losses existed. Batches
    that return ``{"loss": summed, "num_items": n}`` give the set's sum of losses over its sum
    of items, both added up across processes (never a mean of means): a causal language
    model's token-weighted loss, whose ``exp`` is the set's perplexity. A set's batches all
    give ``num_items`` or none do.
    """

    def __init__(self, device: torch.device, where: str) -> None:
        self.window = LossWindow(device)
        self.where = where
        """The step's call, as errors name it."""
        self.summed: bool | None = None
        """Whether the batches give num_items (the first batch with a loss says)."""
        self.batches = 0

    def add(self, loss: torch.Tensor, items: Items | None) -> None:
        self.batches += 1
        summed = items is not None
        if self.summed is None:
            self.summed = summed
        elif summed != self.summed:
            first = "summed losses with num_items" if self.summed else "mean losses"
            raise StepOutputError(
                f"{self.where} returned {'a num_items' if summed else 'no num_items'} at "
                f"batch {self.batches}, where the set's first batches returned {first}; "
                "return num_items on every batch or on none"
            )
        self.window.add(loss, items)

    def reduce(self, accelerator: Accelerator, *, whole_set: bool = True) -> float | None:
        """The set's loss on every process (a collective); None where no batch gave one.

        Items adding up to 0 over the whole set leave the loss undefined: an error there
        (every process sees the same sums, so every process raises); NaN for a part of the
        set (the sanity check's first batch)."""
        totals = self.window.reduce(accelerator)
        if not totals.losses:
            return None
        if totals.mean is not None:
            return totals.mean
        if not whole_set:
            return math.nan
        raise StepOutputError(
            f"{self.where} returned num_items adding up to 0 over the whole set: its summed "
            "loss has no item to be the mean over; give batches with items"
        )
