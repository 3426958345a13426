"""Which process this is, asked at call time of whoever already knows it."""

from __future__ import annotations

import os
import sys

from ._errors import FrozenProcessInfoError, LauncherEnvironmentError
from ._slurm import slurm_job
from ._typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any, Literal

    Source = Literal["accelerate", "torch.distributed", "environment", "single"]

# Launchers name the same four numbers differently. Each row is
# (global rank, world size, local rank, local world size); the first row whose rank and world
# size are both set wins, so torchrun inside a SLURM allocation reads as torchrun. SLURM's
# (a task of srun, not the batch script) is read between torchrun's and MPI's, by _slurm.
_TORCHRUN_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE")
_MPI_VARIABLES = (
    (
        "OMPI_COMM_WORLD_RANK",
        "OMPI_COMM_WORLD_SIZE",
        "OMPI_COMM_WORLD_LOCAL_RANK",
        "OMPI_COMM_WORLD_LOCAL_SIZE",
    ),
    ("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"),
    ("PMIX_RANK", "PMIX_SIZE", "PMIX_LOCAL_RANK", "PMIX_LOCAL_SIZE"),
)


class ProcessInfo:
    """Where the calling process stands in its job.

    ``source`` says which authority answered: an initialised Accelerate state, an initialised
    ``torch.distributed`` group, the launcher's environment variables, or none (a single process).
    Immutable; compares equal by value.
    """

    __slots__ = (
        "local_process_index",
        "num_local_processes",
        "num_processes",
        "process_index",
        "source",
    )
    _FIELDS = (
        "process_index",
        "local_process_index",
        "num_processes",
        "num_local_processes",
        "source",
    )

    process_index: int
    local_process_index: int
    num_processes: int
    num_local_processes: int
    source: Source

    def __init__(
        self,
        process_index: int,
        local_process_index: int,
        num_processes: int,
        num_local_processes: int,
        source: Source,
    ) -> None:
        values = (process_index, local_process_index, num_processes, num_local_processes, source)
        for name, value in zip(self._FIELDS, values, strict=True):
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise FrozenProcessInfoError(f"ProcessInfo is immutable; cannot set {name}")

    def _asdict(self) -> dict[str, Any]:
        """The fields by name, in order."""
        return {name: getattr(self, name) for name in self._FIELDS}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ProcessInfo):
            return NotImplemented
        return self._asdict() == other._asdict()

    def __hash__(self) -> int:
        return hash(tuple(self._asdict().values()))

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={value!r}" for name, value in self._asdict().items())
        return f"ProcessInfo({fields})"

    @property
    def is_main_process(self) -> bool:
        """True on the process with global index 0."""
        return self.process_index == 0

    @property
    def is_local_main_process(self) -> bool:
        """True on the process with local index 0 on its machine."""
        return self.local_process_index == 0

    @property
    def is_last_process(self) -> bool:
        """True on the process with the highest global index."""
        return self.process_index == self.num_processes - 1

    @property
    def has_process_group(self) -> bool:
        """True when collectives (barriers, broadcasts) can be made across the processes."""
        return self.source in ("accelerate", "torch.distributed")


def current_process() -> ProcessInfo:
    """Answer which process this is, resolved now, never cached.

    In order: an initialised Accelerate state, an initialised ``torch.distributed`` process
    group, the launcher's environment (``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``,
    ``LOCAL_WORLD_SIZE``, or the SLURM and MPI equivalents), else a single process.
    Accelerate and torch are consulted only if this process has already imported them.
    """
    return _from_accelerate() or _from_torch_distributed() or _from_environment() or _single()


def _from_accelerate() -> ProcessInfo | None:
    state_module = sys.modules.get("accelerate.state")
    if state_module is None:
        return None
    # PartialState is a borg: its shared dict is empty until someone initialises it, and
    # instantiating it here would initialise it, which is exactly what we must not do.
    shared: dict[str, Any] = state_module.PartialState._shared_state
    if not shared or "num_processes" not in shared:
        return None
    num_processes = int(shared["num_processes"])
    local_size = _local_world_size_from_env(num_processes)
    return ProcessInfo(
        process_index=int(shared["process_index"]),
        local_process_index=int(shared["local_process_index"]),
        num_processes=num_processes,
        num_local_processes=local_size,
        source="accelerate",
    )


def _from_torch_distributed() -> ProcessInfo | None:
    dist = sys.modules.get("torch.distributed")
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return None
    rank = int(dist.get_rank())
    world_size = int(dist.get_world_size())
    local_size = _local_world_size_from_env(world_size)
    local_rank = _int_env("LOCAL_RANK")
    return ProcessInfo(
        process_index=rank,
        local_process_index=rank % local_size if local_rank is None else local_rank,
        num_processes=world_size,
        num_local_processes=local_size,
        source="torch.distributed",
    )


def _from_environment() -> ProcessInfo | None:
    found = _from_variables(*_TORCHRUN_VARIABLES) or _from_slurm()
    for row in _MPI_VARIABLES:
        found = found or _from_variables(*row)
    return found


def _from_slurm() -> ProcessInfo | None:
    job = slurm_job()
    if job is None or not job.in_step:  # the batch script is one process, whatever --ntasks
        return None
    place = (job.process_index, job.local_process_index, job.num_processes)
    return ProcessInfo(*place, job.num_local_processes, "environment")


def _from_variables(
    rank_name: str, size_name: str, local_rank_name: str, local_size_name: str
) -> ProcessInfo | None:
    rank, size = _int_env(rank_name), _int_env(size_name)
    if rank is None or size is None:
        return None
    local_size = _int_env(local_size_name) or size
    local_rank = _int_env(local_rank_name)
    return ProcessInfo(
        process_index=rank,
        local_process_index=rank % local_size if local_rank is None else local_rank,
        num_processes=size,
        num_local_processes=local_size,
        source="environment",
    )


def _single() -> ProcessInfo:
    return ProcessInfo(0, 0, 1, 1, "single")


def _local_world_size_from_env(world_size: int) -> int:
    local_size = _int_env("LOCAL_WORLD_SIZE")
    if local_size:
        return local_size
    job = slurm_job()
    if job is not None and job.in_step and job.num_processes == world_size:
        return job.num_local_processes
    return world_size


def _int_env(name: str) -> int | None:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return None
    # SLURM writes per-node task counts such as "4(x2)"; the leading number is ours.
    digits = raw.strip().split("(", 1)[0]
    try:
        return int(digits)
    except ValueError:
        raise LauncherEnvironmentError(
            f"environment variable {name}={raw!r} is not a whole number; "
            "it is read to find this process's place in a distributed job"
        ) from None
