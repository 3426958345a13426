"""One stop, agreed by every process: a stop asked on any process (a signal, a callback,
patience, a search's pruning) stops every process at the same optimizer step, the step it was
asked at.

At each optimizer step's end the processes exchange their stop flags (an all-reduce, max, of
one number, which also says whether a signal asked for the stop, and which: the requeue
signal above any other, so that a job requeues itself whichever of its processes SLURM's
warning reached): CPU tensors on a gloo group (the default group when it is gloo, else one of its
own), so the exchange never touches the device and no device work waits for it; the host waits
only for the other processes to reach the same step, which they do at the gradients' all-reduce
anyway. On one process a request is the decision, with no exchange at all.
"""

from __future__ import annotations

import signal
from typing import Any

import torch
import torch.distributed as dist

from accmt_callbacks import CallbackHandler

from ..runtime import StopSignals

OTHER_PROCESS = "a stop was asked on another process"

# What a process's flag says: no stop; a stop without a signal; a stop a signal asked for
# (SIGNALLED + its number); the requeue signal's, which outranks the others (REQUEUE + it).
_NONE, _ASKED, _SIGNALLED, _REQUEUE = 0, 1, 2, 1000


class StopAgreement:
    """The run's stop decision, agreed across processes at optimizer-step boundaries."""

    def __init__(
        self, callbacks: CallbackHandler, processes: int, signals: StopSignals | None = None
    ) -> None:
        self.callbacks, self.signals = callbacks, signals
        self._agreed = False
        self._signal: signal.Signals | None = None
        self._group: Any = None
        self._several = processes > 1 and dist.is_available() and dist.is_initialized()
        if self._several and dist.get_backend() != "gloo":
            self._group = dist.new_group(backend="gloo")  # the flags never reach the device

    @property
    def agreed(self) -> bool:
        """Whether every process stops at this boundary (alone: whether a stop was asked)."""
        return self._agreed if self._several else self.callbacks.should_stop

    @property
    def stop_signal(self) -> signal.Signals | None:
        """Once a stop is agreed: the signal that asked for it, on whichever process (the
        requeue signal first), or None when none did."""
        if self._several:
            return self._signal
        return None if self.signals is None else self.signals.first

    def _flag(self) -> int:
        if not self.callbacks.should_stop:
            return _NONE
        received = None if self.signals is None else self.signals.first
        if received is None:
            return _ASKED
        assert self.signals is not None
        base = _REQUEUE if received == self.signals.requeue_signal else _SIGNALLED
        return base + int(received)

    def exchange(self) -> bool:
        """At a boundary every process reaches together (an optimizer step's end, after an
        evaluation, an epoch's end): whether any process asked to stop."""
        if not self._several or self._agreed:
            return self.agreed
        flag = torch.tensor([self._flag()], dtype=torch.int32)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX, group=self._group)
        agreed = int(flag.item())  # a CPU tensor: no device to wait for
        if agreed != _NONE:
            if not self.callbacks.should_stop:
                self.callbacks.request_stop(OTHER_PROCESS)
            self._agreed = True
            if agreed >= _SIGNALLED:
                base = _REQUEUE if agreed >= _REQUEUE else _SIGNALLED
                self._signal = signal.Signals(agreed - base)
        return self._agreed

    def close(self) -> None:
        """The run's end: a group of its own goes."""
        if self._group is not None:
            dist.destroy_process_group(self._group)
            self._group = None
