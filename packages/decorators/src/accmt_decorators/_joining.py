"""A job's processes that share no process group yet: make the one their launcher set up.

torchrun and ``accelerate launch`` (which ``accmt launch`` runs) give every process the job's
rendezvous (``MASTER_ADDR``, ``MASTER_PORT``) and its place (``RANK``, ``WORLD_SIZE``): all
``torch.distributed`` needs to make the job's default group. ``srun`` gives only SLURM's
variables, from which they are written first (``_slurm.export_slurm_rendezvous``). A barrier
before any Accelerator exists (``with main_process_first(): prepare_dataset()``) makes it
there, and it stays the job's group: an Accelerator made later (the Trainer's) adopts an
existing group rather than make another, so nothing is made twice and nothing is torn down
under the Trainer.

The group is made as Accelerate would use it: gloo for the CPU, and NCCL beside it bound to this
process's GPU when the job runs on GPUs (a barrier on NCCL without its device would put every
process on GPU 0). It is made directly, not through Accelerate's ``PartialState()``, whose
default on a machine without GPUs counts one process per job (it needs ``cpu=True`` there).
"""

from __future__ import annotations

import atexit
import importlib
import os

from ._errors import NoProcessGroupError
from ._process import ProcessInfo, current_process
from ._slurm import export_slurm_rendezvous
from ._typing import TYPE_CHECKING

if TYPE_CHECKING:
    from types import ModuleType
    from typing import Any

_RENDEZVOUS = ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE")
_TRUE = ("1", "true", "yes", "y", "on", "t")


def join_launchers_group(process: ProcessInfo, what: str) -> ProcessInfo:
    """Make the job's default ``torch.distributed`` group from the launcher's environment, and
    say where this process stands in it. Raises :class:`NoProcessGroupError`, naming what is
    missing, when the environment has no rendezvous or torch is not installed."""
    export_slurm_rendezvous()  # a task of srun: torch's variables from SLURM's
    missing = [name for name in _RENDEZVOUS if not os.environ.get(name, "").strip()]
    if missing:
        raise NoProcessGroupError(
            f"{what} needs a process group to synchronise {process.num_processes} processes; "
            f"none exists, and the launcher's environment has no {', '.join(missing)} to make "
            "one from. Start the job with torchrun or accelerate launch (accmt launch), which "
            "set them (or srun, whose SLURM_PROCID, SLURM_NTASKS and SLURM_JOB_NODELIST "
            "stand for them), or make the group first: torch.distributed.init_process_group(), or "
            "Accelerator(cpu=True) on a machine without GPUs (Accelerator() or PartialState() "
            "there count one process)."
        )
    try:
        distributed = importlib.import_module("torch.distributed")
    except ImportError:
        raise NoProcessGroupError(
            f"{what} needs a process group to synchronise {process.num_processes} processes, "
            "and torch, which would make it from the launcher's environment, is not installed"
        ) from None
    distributed.init_process_group(**_group_options(process))
    atexit.register(_leave, distributed, distributed.group.WORLD)
    return current_process()


def _group_options(process: ProcessInfo) -> dict[str, Any]:
    torch = importlib.import_module("torch")
    on_cpu = os.environ.get("ACCELERATE_USE_CPU", "").strip().lower() in _TRUE
    if on_cpu or not torch.cuda.is_available():
        return {"backend": "gloo"}
    # A task given one GPU of its own (srun --gpus-per-task=1) sees it as cuda:0.
    device = torch.device("cuda", process.local_process_index % torch.cuda.device_count())
    return {"backend": "cpu:gloo,cuda:nccl", "device_id": device}


def _leave(distributed: ModuleType, group: object) -> None:
    """At exit, destroy the group made here if it is still the job's: a gloo group left alive
    while the interpreter tears its threads down can abort the process."""
    if distributed.is_initialized() and distributed.group.WORLD is group:
        distributed.destroy_process_group()
