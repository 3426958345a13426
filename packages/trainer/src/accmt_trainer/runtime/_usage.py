"""What a run uses of its machine, as the Monitor asks for it, read on logging steps only: peak
memory, this process's CPU use, and the busy percentage of each GPU (through NVML)."""

from __future__ import annotations

import importlib.util
import time
import warnings

import torch

from ..config import Monitor


class CpuClock:
    """This process's CPU use between two readings, in percent of one core: 250 is two and a
    half cores busy. CPU time is ``time.process_time`` (every thread of the process; DataLoader
    workers are processes of their own), wall time ``time.monotonic``."""

    def __init__(self) -> None:
        self.restart()

    def restart(self) -> None:
        self._since = (time.process_time(), time.monotonic())

    def percent(self) -> float:
        """The use since the previous reading (or the restart), and a restart."""
        (cpu, wall), now = self._since, (time.process_time(), time.monotonic())
        self._since = now
        return 100.0 * (now[0] - cpu) / max(now[1] - wall, 1e-9)


class Usage:
    """The values the Monitor's ``memory``, ``cpu_utilization`` and ``gpu_utilization`` log.

    GPU utilization is read on the main process (the one that logs), for each GPU it sees
    (``torch.cuda.device_count()``, so ``CUDA_VISIBLE_DEVICES`` applies), with
    ``torch.cuda.utilization``: NVML on NVIDIA GPUs, whose Python bindings (pynvml, from
    ``pip install 'accmt-trainer[gpu]'``) torch loads itself, amdsmi on ROCm. Nothing here
    imports them. Where the run has no GPU, or nothing reports its utilization, one warning
    says why when the run starts, and nothing is logged for it.
    """

    def __init__(self, monitor: Monitor, device: torch.device, *, main_process: bool) -> None:
        self.device = device
        self.memory = monitor.memory
        self.cpu = CpuClock() if monitor.cpu_utilization else None
        wanted = monitor.gpu_utilization and main_process
        self.gpus = _gpus_reporting_utilization(device) if wanted else []

    def restart(self) -> None:
        """The next CPU reading counts from now."""
        if self.cpu is not None:
            self.cpu.restart()

    def read(self) -> dict[str, float]:
        values: dict[str, float] = {}
        if self.memory:
            values["train/memory_gib"] = memory_gib(self.device)
        if self.cpu is not None:
            values["train/cpu_utilization"] = self.cpu.percent()
        try:
            busy = {gpu: float(torch.cuda.utilization(gpu)) for gpu in self.gpus}
        except Exception as error:  # NVML gave up since the run started (driver reset, ...)
            _no_gpu_utilization(f"reading it failed ({type(error).__name__}: {error})")
            self.gpus, busy = [], {}
        values.update({f"train/gpu_utilization/{gpu}": value for gpu, value in busy.items()})
        return values


def memory_gib(device: torch.device) -> float:
    """Peak CUDA memory of ``device``, else the process's peak resident memory, in GiB."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**30
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def _gpus_reporting_utilization(device: torch.device) -> list[int]:
    """The GPUs whose utilization can be read, after one reading each; [] with a warning."""
    if device.type != "cuda":
        _no_gpu_utilization(f"this run has no GPU (it trains on {device.type})")
        return []
    if not torch.version.hip and importlib.util.find_spec("pynvml") is None:
        _no_gpu_utilization(
            "it needs NVML's Python bindings (nvidia-ml-py): pip install 'accmt-trainer[gpu]'"
        )
        return []
    gpus = list(range(torch.cuda.device_count()))
    try:
        for gpu in gpus:
            torch.cuda.utilization(gpu)
    except Exception as error:  # no driver, or a GPU that does not report it (a MIG slice)
        _no_gpu_utilization(f"NVML does not report it here ({type(error).__name__}: {error})")
        return []
    return gpus


def _no_gpu_utilization(why: str) -> None:
    warnings.warn(
        f"Monitor(gpu_utilization=True): {why}; no GPU utilization is logged", stacklevel=2
    )
