"""One stop, agreed by every process: a stop asked on any process (a signal, a callback,
patience, a search's pruning) stops every process at the same optimizer step.

Each optimizer step starts an asynchronous all-reduce (max) of this process's stop flag and
reads the one the step before started, so all processes decide on the same step, one step
after the request, and no step waits for the others: the flags are CPU tensors on a gloo group
(the default group when it is gloo, else one of its own), which never touches the device. An
epoch's end, which every process reaches together, agrees at once. On one process a request is
the decision.
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
        self._work: Any = None
        self._flag = torch.zeros(1, dtype=torch.int32)
        self._several = processes > 1 and dist.is_available() and dist.is_initialized()
        if self._several and dist.get_backend() != "gloo":
            self._group = dist.new_group(backend="gloo")  # the flags never reach the device

    @property
    def agreed(self) -> bool:
        """Whether every process stops at this boundary (alone: whether a stop was asked)."""
        return self._agreed if self._several else self.callbacks.should_stop

    def at_step(self) -> bool:
        """At an optimizer step's end: what the previous step's exchange decided, and this
        step's exchange started."""
        if not self._several:
            return self.agreed
        decided = self._finish()
        self._flag = torch.tensor([int(self.callbacks.should_stop)], dtype=torch.int32)
        self._work = dist.all_reduce(
            self._flag, op=dist.ReduceOp.MAX, group=self._group, async_op=True
        )
        return self._decide(decided)

    def now(self) -> bool:
        """Where the processes meet anyway (an evaluation, an epoch's end): the flags of this
        moment, and of the exchange in flight, agreed at once."""
        if not self._several:
            return self.agreed
        decided = self._finish()
        flag = torch.tensor([int(self.callbacks.should_stop or decided)], dtype=torch.int32)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX, group=self._group)
        return self._decide(bool(flag.item()))

    def close(self) -> None:
        """The run's end: the exchange in flight completes, and a group of its own goes."""
        if self._several:
            self._finish()
            if self._group is not None:
                dist.destroy_process_group(self._group)
                self._group = None

    def _finish(self) -> bool:
        if self._work is None:
            return False
        self._work.wait()
        self._work = None
        return bool(self._flag.item())  # a CPU tensor: no device to wait for

    def _decide(self, decided: bool) -> bool:
        if decided and not self.callbacks.should_stop:
            self.callbacks.request_stop(OTHER_PROCESS)
        self._agreed = self._agreed or decided
        return self._agreed
