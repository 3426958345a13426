"""The processes of one search job: the main one decides, every decision reaches them all."""

from __future__ import annotations

from typing import Any, TypeVar

from accelerate import PartialState
from accelerate.utils import broadcast_object_list, gather_object

from accmt_trainer.integration import join_slurm_job, use_cpu

T = TypeVar("T")


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
        Under ``srun --ntasks=N`` the job is formed from SLURM's variables first, as the
        Trainer forms it.
        """
        join_slurm_job()
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
