"""The two collectives the decorators need, made through whatever group already exists."""

from __future__ import annotations

import sys

from ._typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any

from ._joining import join_launchers_group
from ._process import ProcessInfo, current_process


def wait_for_everyone() -> None:
    """Block until every process of the job reaches this call.

    Uses Accelerate's barrier when an Accelerate state is initialised, else
    ``torch.distributed.barrier()``. On a single process it returns at once. On several
    processes known only from the launcher's environment (torchrun, ``accelerate launch``,
    ``accmt launch``, before any Accelerator exists) it first makes the job's
    ``torch.distributed`` group from that environment, the group an Accelerator made later
    adopts; where the environment has no rendezvous (``MASTER_ADDR``, ``MASTER_PORT``) it
    raises :class:`NoProcessGroupError` rather than let processes run past each other.
    """
    process = current_process()
    if process.num_processes == 1:
        return
    process = _with_group(process, "wait_for_everyone()")
    state_module = sys.modules.get("accelerate.state")
    if process.source == "accelerate" and state_module is not None:
        state_module.PartialState().wait_for_everyone()
    else:
        sys.modules["torch.distributed"].barrier()


def gather_objects(value: Any, process: ProcessInfo) -> list[Any]:
    """Every process's ``value``, in process order, on every process."""
    if process.num_processes == 1:
        return [value]
    _with_group(process, "broadcast=True")
    dist = sys.modules["torch.distributed"]
    gathered: list[Any] = [None] * process.num_processes
    dist.all_gather_object(gathered, value)
    return gathered


def _with_group(process: ProcessInfo, what: str) -> ProcessInfo:
    """``process``, in a process group: the existing one, else the launcher's, made now."""
    return process if process.has_process_group else join_launchers_group(process, what)
