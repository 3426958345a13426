"""One stop, agreed by every process: a stop asked on any process (a signal, a callback,
patience, a search's pruning) stops every process at the same optimizer step, the step it was
asked at.

At each optimizer step's end the processes exchange their stop flags (an all-reduce, max, of
one number): CPU tensors on a gloo group (the default group when it is gloo, else one of its
own), so the exchange never touches the device and no device work waits for it; the host waits
only for the other processes to reach the same step, which they do at the gradients' all-reduce
anyway. On one process a request is the decision, with no exchange at all.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

from accmt_callbacks import CallbackHandler

OTHER_PROCESS = "a stop was asked on another process"


class StopAgreement:
    """The run's stop decision, agreed across processes at optimizer-step boundaries."""

    def __init__(self, callbacks: CallbackHandler, processes: int) -> None:
        self.callbacks = callbacks
        self._agreed = False
        self._group: Any = None
        self._several = processes > 1 and dist.is_available() and dist.is_initialized()
        if self._several and dist.get_backend() != "gloo":
            self._group = dist.new_group(backend="gloo")  # the flags never reach the device

    @property
    def agreed(self) -> bool:
        """Whether every process stops at this boundary (alone: whether a stop was asked)."""
        return self._agreed if self._several else self.callbacks.should_stop

    def exchange(self) -> bool:
        """At a boundary every process reaches together (an optimizer step's end, after an
        evaluation, an epoch's end): whether any process asked to stop."""
        if not self._several or self._agreed:
            return self.agreed
        flag = torch.tensor([int(self.callbacks.should_stop)], dtype=torch.int32)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX, group=self._group)
        if bool(flag.item()):  # a CPU tensor: no device to wait for
            if not self.callbacks.should_stop:
                self.callbacks.request_stop(OTHER_PROCESS)
            self._agreed = True
        return self._agreed

    def close(self) -> None:
        """The run's end: a group of its own goes."""
        if self._group is not None:
            dist.destroy_process_group(self._group)
            self._group = None
