"""What packages built on accmt-trainer, such as accmt-search, use from it.

A user writes against ``accmt_trainer`` itself; a package that drives the Trainer as a part of
its own work (a search runs a ``Trainer.fit`` per trial) needs a few more things: how the
Trainer picks the device, the scope that tears down only the process group it made, the
signal handling that turns SIGINT/SIGTERM into a stop request, and the check of a folder the
Trainer makes. This module is that surface, and the one place such a package imports
accmt-trainer from: the rest of accmt-trainer's modules are private and may change. Its names
are not in ``accmt_trainer.__all__`` (nor, through it, in ``accmt.__all__``); the user-facing
ones it needs are re-exported here as well, the same objects as ``accmt_trainer``'s.

- [`Trainer`][accmt_trainer.Trainer], [`AcceleratorModule`][accmt_trainer.AcceleratorModule],
  [`HyperParameters`][accmt_trainer.HyperParameters],
  [`HyperParametersError`][accmt_trainer.HyperParametersError],
  [`TrainerConfigError`][accmt_trainer.TrainerConfigError]: as documented with
  ``accmt_trainer``.
- `use_cpu(cpu)`: whether ``Trainer(cpu=cpu)`` runs on the CPU, so that a program which makes
  Accelerate's state before the Trainer (a search sending each trial's values to every
  process) makes it with the Trainer's choice.
- `join_slurm_job()`: on a task of ``srun --ntasks=N python ...``, torch's and Accelerate's
  variables written from SLURM's (and torch's threads), as the Trainer does before it makes
  its Accelerator, so that a program which makes Accelerate's state first forms the same job.
- `ProcessGroupScope`: a context manager that, on exit, tears down the process group only if
  it was made inside the block, so that one group serves a whole search of many fits.
- `stop_on_signals(request_stop, enabled)`: a context manager in which SIGINT and SIGTERM call
  ``request_stop(reason)`` instead of killing the process.
- `check_writable(folders, owner)`: each ``(option, folder)`` can be made and written to, else
  a ``TrainerConfigError`` naming ``owner(option=...)``.
"""

from . import (
    AcceleratorModule,
    HyperParameters,
    HyperParametersError,
    Trainer,
    TrainerConfigError,
)
from .checkpointing import check_writable
from .runtime import ProcessGroupScope, join_slurm_job, stop_on_signals, use_cpu

__all__ = [
    "AcceleratorModule",
    "HyperParameters",
    "HyperParametersError",
    "ProcessGroupScope",
    "Trainer",
    "TrainerConfigError",
    "check_writable",
    "join_slurm_job",
    "stop_on_signals",
    "use_cpu",
]
