"""``profile_steps``: torch.profiler over a window of optimizer steps, on every process, each
writing its Chrome trace (for TensorBoard's profiler plugin, Perfetto or chrome://tracing)."""

from __future__ import annotations

import warnings
from pathlib import Path

from torch.profiler import ProfilerAction, ProfilerActivity, profile, tensorboard_trace_handler

from ..console import logger

# What a device adds to the CPU's activity, where torch was built with it.
_DEVICE_ACTIVITIES = {"cuda": ProfilerActivity.CUDA, "xpu": ProfilerActivity.XPU}


def _record(step: int) -> ProfilerAction:
    """Every step is recorded: the window is the loop's to keep. With a schedule, and only
    then, torch marks each step as ``ProfilerStep#<n>`` (the plugins' step view)."""
    return ProfilerAction.RECORD


class StepProfiler:
    """Profiles the optimizer steps ``start + 1`` to ``stop`` of ``steps = (start, stop)``:
    from global step ``start`` (the loop says each step it reaches, from the fit's start) to
    global step ``stop``. Each step is the profile's ``ProfilerStep#<n>``: its batches, its
    optimizer step, and what follows it (logging, evaluation, checkpoint). A run that starts
    inside the window (a resume) profiles the rest of it; one that ends inside it, up to its
    end. Without ``steps``, nothing."""

    def __init__(
        self,
        steps: tuple[int, int] | None,
        folder: Path,
        *,
        process_index: int,
        device: str,
        total_steps: int,
    ) -> None:
        self.steps, self.folder = steps, folder
        self.worker = f"process_{process_index}"
        self.main_process = process_index == 0
        # A run on such a device has a torch built for it, and so a profiler that records it.
        device_activity = _DEVICE_ACTIVITIES.get(device)
        self.activities = [ProfilerActivity.CPU, *([device_activity] if device_activity else [])]
        self._profile: profile | None = None
        self._done = steps is None
        self._span = (0, 0)  # the global steps the recording started from and reached
        self.total_steps = total_steps
        if steps is not None and steps[0] >= total_steps and self.main_process:
            warnings.warn(
                f"Trainer(profile_steps={steps}): the run has {total_steps} optimizer steps; "
                "nothing is profiled",
                UserWarning,
                stacklevel=2,
            )

    def at_step(self, global_step: int) -> None:
        """The run reached ``global_step``: start, mark the next step, or stop and write."""
        if self._done or self.steps is None:
            return
        start, stop = self.steps
        if self._profile is None:
            if start <= global_step < min(stop, self.total_steps):  # a step follows
                self._start()
                self._span = (global_step, global_step)
            return
        self._span = (self._span[0], global_step)
        if global_step >= stop:
            self.close()
        else:
            self._profile.step()

    def _start(self) -> None:
        self._profile = profile(
            activities=self.activities,
            schedule=_record,
            record_shapes=True,
            on_trace_ready=tensorboard_trace_handler(str(self.folder), worker_name=self.worker),
        )
        self._profile.start()

    def close(self) -> None:
        """Stop recording and write this process's trace (the window's end, or the run's)."""
        recorded, self._profile, self._done = self._profile, None, True
        if recorded is None:
            return
        recorded.stop()  # writes the trace: its on_trace_ready
        if self.main_process:
            first, last = self._span
            logger.info(
                "profiled optimizer steps %d to %d: a trace of each process in %s",
                first + 1,
                last,
                self.folder,
            )
