"""What the Trainer logs to its trackers."""

from __future__ import annotations

import math
from typing import Any

import attrs

from .._errors import TrainerConfigError


def _flops(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is None:
        return
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not number or not (value > 0 and math.isfinite(value)):
        raise TrainerConfigError(
            f"Monitor({attribute.name}=...): expected a positive number of FLOPs or None, "
            f"got {value!r}"
        )


@attrs.frozen(kw_only=True)
class Monitor:
    """Choose what is logged, and under which names.

    Each flag is read on logging steps only (every ``log_every`` optimizer steps, and after each
    evaluation), so what is off costs nothing, and what is on costs one host sync per log.
    """

    train_loss: bool = True
    """``train/loss``: mean training loss since the last log, averaged over processes."""
    validation_loss: bool = True
    """``<set>/loss``: the validation loss of each validation set."""
    additional_metrics: bool = True
    """``<set>/<metric>``: each metric of each validation set."""
    epoch: bool = True
    """``train/epoch``: the epoch, as a fraction (1.5 is half-way through the second)."""
    learning_rate: bool = True
    """``train/lr``: the optimizer's learning rate; with several parameter groups,
    ``train/lr/<i>`` for each. ``Monitor(learning_rate=False)`` turns it off."""
    grad_norm: bool = False
    """``train/grad_norm``: the gradient norm before clipping, on the logged optimizer step."""
    throughput: bool = False
    """``train/samples_per_second``: samples of all processes per second since the last log;
    and when ``training_step`` returns ``num_items``, ``train/items_per_second``: those items
    (tokens, for a language model) of all processes per second."""
    flops_per_item: float | None = attrs.field(default=None, validator=_flops)
    """With ``peak_flops``, ``train/mfu``: the model FLOPs utilisation, items per second times
    ``flops_per_item`` (forward and backward: about ``6 * parameters`` for a token of a
    transformer) over the peak of all processes' devices. Needs ``num_items``."""
    peak_flops: float | None = attrs.field(default=None, validator=_flops)
    """One device's peak FLOP/s, from its spec sheet, at the run's precision (with
    ``flops_per_item``)."""
    memory: bool = False
    """``train/memory_gib``: peak accelerator memory of this process (CUDA), else RSS."""
    cpu_utilization: bool = False
    """``train/cpu_utilization``: this process's CPU use since the last log, in percent of one
    core (from 0 to 100 times the cores it runs on)."""
    gpu_utilization: bool = False
    """``train/gpu_utilization/<i>``: how busy each GPU the main process sees was, in percent,
    as NVML reports it (``pip install 'accmt-trainer[gpu]'``). Without a GPU or NVML, a
    warning when the run starts, and nothing logged."""

    def __attrs_post_init__(self) -> None:
        given = {"flops_per_item": self.flops_per_item, "peak_flops": self.peak_flops}
        missing = [name for name, value in given.items() if value is None]
        if len(missing) == 1:
            (absent,) = missing
            (present,) = set(given) - {absent}
            raise TrainerConfigError(
                f"Monitor({present}=...): train/mfu needs {absent} too; give both (the FLOPs of "
                "one item's forward and backward, and one device's peak FLOP/s), or neither"
            )

    @property
    def logs_mfu(self) -> bool:
        """Whether ``train/mfu`` is asked for: both its numbers are given."""
        return self.flops_per_item is not None and self.peak_flops is not None
