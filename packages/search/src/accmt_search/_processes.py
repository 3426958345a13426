"""The processes of one search job: the main one decides, every decision reaches them all."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any, TypeVar

from accelerate import DistributedType, PartialState
from accelerate.utils import broadcast_object_list, gather_object

from accmt_trainer import use_cpu

T = TypeVar("T")
_FORK_LAUNCHED = "FORK_LAUNCHED"


class ProcessLink:
    """Sends the main process's decisions to every process, and brings each one's result back.

    With one process both are free. Made at the start of ``optimize``, so that the process group
    exists before the first trial's parameters are sent (the Trainer makes its Accelerator only
    inside ``fit``).
    """

    def __init__(self, state: PartialState) -> None:
        self.state = state

    @classmethod
    def start(cls, cpu: bool | None) -> ProcessLink:
        """Join this job's process group on the device the Trainer will choose.

        Accelerate's state is one per process and fixed once made, so it must agree with the
        Trainer's ``cpu`` option: by default, several processes on a machine without an
        accelerator run on the CPU (gloo), where Accelerate alone would run each on its own.
        """
        return cls(PartialState(cpu=use_cpu(cpu)))

    @property
    def is_main(self) -> bool:
        return bool(self.state.is_main_process)

    @property
    def is_local_main(self) -> bool:
        return bool(self.state.is_local_main_process)

    @property
    def num_processes(self) -> int:
        return int(self.state.num_processes)

    @contextlib.contextmanager
    def kept(self) -> Iterator[None]:
        """Keep the process group alive across trials.

        ``Trainer.fit`` ends with ``Accelerator.end_training``, which destroys the process group:
        the next trial could neither train nor hear the main process. Accelerate skips that for
        a job its notebook launcher forked (``FORK_LAUNCHED``, read each time its state is
        made); the search sets it while it runs and puts it back after, leaving the group to the
        user's script (a Trainer fit after the search still works).
        """
        if self.num_processes == 1 or self.state.distributed_type == DistributedType.XLA:
            yield
            return
        previous = os.environ.get(_FORK_LAUNCHED)
        os.environ[_FORK_LAUNCHED] = "1"
        try:
            yield
        finally:
            if previous is None:
                os.environ.pop(_FORK_LAUNCHED, None)
            else:
                os.environ[_FORK_LAUNCHED] = previous
            # What end_training would have done: a group left alive at exit can abort the
            # process as its threads are torn down ("terminate called without an active
            # exception"). All processes end the search together.
            self.state.wait_for_everyone()
            self.state.destroy_process_group()

    def broadcast(self, value: T) -> T:
        """The main process's ``value``, on every process (others pass anything, e.g. None)."""
        if self.num_processes == 1:
            return value
        box: list[Any] = [value]
        broadcast_object_list(box, from_process=0)
        received: T = box[0]
        return received

    def gather(self, value: T) -> list[T]:
        """Every process's ``value``, in process order, on every process."""
        if self.num_processes == 1:
            return [value]
        gathered: list[T] = gather_object([value])
        return gathered
