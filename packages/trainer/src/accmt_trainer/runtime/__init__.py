"""Where a run executes: the Accelerator (CPU or not, mixed precision, accumulation,
compile), the process group a job makes and tears down, FSDP, signals (and the exit status and
SLURM requeue they lead to), seeding, the trackers
(their runs continued across resumes), the profiler of profile_steps, and the memory and CPU use
the Monitor logs."""

from ._accelerator import (
    AcceleratorOptions,
    drop_mixed_precision_forward,
    join_slurm_job,
    make_accelerator,
    own_model,
    use_cpu,
)
from ._fsdp import reshard, shards_the_model, warn_if_not_sharded
from ._process_group import ProcessGroupScope
from ._profiling import StepProfiler
from ._requeue import job_to_requeue, requeue
from ._seeding import kept_rng_states, seed_everything
from ._signals import (
    EXIT_RESUMABLE,
    StopSignals,
    exit_status,
    requeue_signal_name,
    stop_on_signals,
)
from ._tracker_runs import TrackerRuns
from ._trackers import LoggingOptions, LogWith, log_artifact, send, start_trackers
from ._usage import Usage

__all__ = [
    "EXIT_RESUMABLE",
    "AcceleratorOptions",
    "LogWith",
    "LoggingOptions",
    "ProcessGroupScope",
    "StepProfiler",
    "StopSignals",
    "TrackerRuns",
    "Usage",
    "drop_mixed_precision_forward",
    "exit_status",
    "job_to_requeue",
    "join_slurm_job",
    "kept_rng_states",
    "log_artifact",
    "make_accelerator",
    "own_model",
    "requeue",
    "requeue_signal_name",
    "reshard",
    "seed_everything",
    "send",
    "shards_the_model",
    "start_trackers",
    "stop_on_signals",
    "use_cpu",
    "warn_if_not_sharded",
]
