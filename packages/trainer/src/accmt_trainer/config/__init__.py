"""What a user configures and how it is checked: ``HyperParameters`` (files, the optimizers and
schedulers a configuration may name, warmup schedules), ``Monitor``, the checks behind every
options object, and the refusal of accmt 1.x's Trainer keywords."""

from ._former_options import refuses_former_options
from ._hyperparameters import HyperParameters
from ._monitor import Monitor
from ._namespaces import Optimizer, Scheduler
from ._option_checks import (
    check_mapping,
    check_patience,
    check_shard_size,
    clip_value,
    log_every_value,
    one_of,
    option,
    options_of,
    positive_int,
    profile_window,
    suggest,
)
from ._registry import register_optimizer, register_scheduler

__all__ = [
    "HyperParameters",
    "Monitor",
    "Optimizer",
    "Scheduler",
    "check_mapping",
    "check_patience",
    "check_shard_size",
    "clip_value",
    "log_every_value",
    "one_of",
    "option",
    "options_of",
    "positive_int",
    "profile_window",
    "refuses_former_options",
    "register_optimizer",
    "register_scheduler",
    "suggest",
]
