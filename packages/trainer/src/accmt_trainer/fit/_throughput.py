"""Throughput between two logs: samples and items (tokens) of all processes per second, and the
model FLOPs utilisation those items give."""

from __future__ import annotations

import time
import warnings

import torch
from accelerate import Accelerator

from ..config import Monitor
from ..evaluation import Items, scalar


class Throughput:
    """What the Monitor's ``throughput``, ``flops_per_item`` and ``peak_flops`` log, over the
    time since the last log (or the epoch's start, so that an epoch's end is not counted).

    Items are counted as the steps give them, without reading them: a tensor is added in place
    to a sum on the device (kept steps' tensors would fragment the heap; see ``LossWindow``).
    A log reads them once, summed over processes in one all-reduce.
    """

    def __init__(self, monitor: Monitor, accelerator: Accelerator, batch_size: int) -> None:
        self.monitor, self.accelerator = monitor, accelerator
        self.samples_per_batch = batch_size * accelerator.num_processes
        self.counting = monitor.throughput or monitor.logs_mfu
        self.given = False
        """Whether the steps give ``num_items`` (a run's steps all do, or none do)."""
        self._numbers = 0  # items given as ints
        self._tensor_items = torch.zeros((), device=accelerator.device, dtype=torch.float64)
        self._since = (time.perf_counter(), 0)  # when, and at which batch_iteration
        self._said_no_mfu = False

    def restart(self, batch_iteration: int) -> None:
        """Count from now, at ``batch_iteration``."""
        self._since = (time.perf_counter(), batch_iteration)
        self._forget_items()

    def _forget_items(self) -> None:
        self._numbers = 0
        self._tensor_items.zero_()

    def count(self, items: Items | None) -> None:
        """A batch's ``num_items``; nothing when no value needs them."""
        if not self.counting or items is None:
            return
        self.given = True
        if isinstance(items, torch.Tensor):
            self._tensor_items.add_(scalar(items))
        else:
            self._numbers += items

    def read(self, batch_iteration: int) -> dict[str, float]:
        """The values since the last reading (or restart), and a restart. With items, this is a
        collective: every process reads at the same log."""
        now = time.perf_counter()
        then, then_batch = self._since
        elapsed = max(now - then, 1e-9)
        values: dict[str, float] = {}
        if self.monitor.throughput:
            samples = (batch_iteration - then_batch) * self.samples_per_batch
            values["train/samples_per_second"] = samples / elapsed
        if self.given:
            values.update(self._per_item(self._all_items() / elapsed))
        elif self.monitor.logs_mfu:
            self._say_no_mfu()
        self._since = (now, batch_iteration)
        self._forget_items()
        return values

    def _all_items(self) -> float:
        """The items of every process since the last reading."""
        mine = self._tensor_items + self._numbers
        return float(self.accelerator.reduce(mine, reduction="sum").item())

    def _per_item(self, items_per_second: float) -> dict[str, float]:
        monitor, values = self.monitor, {}
        if monitor.throughput:
            values["train/items_per_second"] = items_per_second
        if monitor.flops_per_item is not None and monitor.peak_flops is not None:
            peak = monitor.peak_flops * self.accelerator.num_processes
            values["train/mfu"] = items_per_second * monitor.flops_per_item / peak
        return values

    def _say_no_mfu(self) -> None:
        if self._said_no_mfu or not self.accelerator.is_main_process:
            return
        self._said_no_mfu = True
        warnings.warn(
            "Monitor(flops_per_item=..., peak_flops=...): train/mfu is not logged: "
            "training_step returns no num_items, the items its FLOPs are counted in (return "
            '{"loss": summed_loss, "num_items": n})',
            UserWarning,
            stacklevel=2,
        )
