"""What the Trainer logs to its trackers."""

from __future__ import annotations

import attrs


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
    """``train/samples_per_second``: samples of all processes per second since the last log."""
    memory: bool = False
    """``train/memory_gib``: peak accelerator memory of this process (CUDA), else RSS."""
    cpu_utilization: bool = False
    """``train/cpu_utilization``: this process's CPU use since the last log, in percent of one
    core (from 0 to 100 times the cores it runs on)."""
    gpu_utilization: bool = False
    """``train/gpu_utilization/<i>``: how busy each GPU the main process sees was, in percent,
    as NVML reports it (``pip install 'accmt-trainer[gpu]'``). Without a GPU or NVML, a
    warning when the run starts, and nothing logged."""
