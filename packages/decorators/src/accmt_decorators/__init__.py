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
    "current_process",
    "local_main_process_first",
    "main_process_first",
    "on_last_process",
    "on_local_main_process",
    "on_local_process",
    "on_main_process",
    "on_process",
    "wait_for_everyone",
]
