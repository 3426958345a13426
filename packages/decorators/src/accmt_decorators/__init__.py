"""Run a function on the right processes of a distributed job, decided when it is called.

Standard library only: torch and Accelerate are consulted only when the process has
already imported them.
"""

from ._collective import wait_for_everyone
from ._errors import (
    BroadcastError,
    DecoratorError,
    DecoratorUsageError,
    FrozenProcessInfoError,
    LauncherEnvironmentError,
    NoProcessGroupError,
    ProcessIndexError,
)
from ._ordering import ProcessFirst, local_main_process_first, main_process_first
from ._process import ProcessInfo, current_process
from ._selectors import (
    on_last_process,
    on_local_main_process,
    on_local_process,
    on_main_process,
    on_process,
)
from ._slurm import SlurmJob, expand_hostlist, export_slurm_rendezvous, slurm_job

__all__ = [
    "BroadcastError",
    "DecoratorError",
    "DecoratorUsageError",
    "FrozenProcessInfoError",
    "LauncherEnvironmentError",
    "NoProcessGroupError",
    "ProcessFirst",
    "ProcessIndexError",
    "ProcessInfo",
    "SlurmJob",
    "current_process",
    "expand_hostlist",
    "export_slurm_rendezvous",
    "local_main_process_first",
    "main_process_first",
    "on_last_process",
    "on_local_main_process",
    "on_local_process",
    "on_main_process",
    "on_process",
    "slurm_job",
    "wait_for_everyone",
]
