"""The accmt Trainer: write an AcceleratorModule, call ``Trainer.fit``, on Accelerate."""

from ._accelerator import use_cpu
from ._curriculum import Curriculum, RangeCurriculum, RatioCurriculum, StepsCurriculum
from ._errors import (
    ArtifactNotFoundError,
    CheckpointError,
    HyperParametersError,
    NonFiniteLossError,
    StepOutputError,
    TrainerConfigError,
    TrainerError,
)
from ._hyperparameters import HyperParameters
from ._module import AcceleratorModule, ExtendedAcceleratorModule
from ._monitor import Monitor
from ._namespaces import Optimizer, Scheduler
from ._predictions import iter_predictions, load_predictions
from ._process_group import ProcessGroupScope
from ._registry import register_optimizer, register_scheduler
from ._seeding import seed_everything
from ._signals import stop_on_signals
from ._trainer import Trainer
from ._weights import load_weights

__all__ = [
    "AcceleratorModule",
    "ArtifactNotFoundError",
    "CheckpointError",
    "Curriculum",
    "ExtendedAcceleratorModule",
    "HyperParameters",
    "HyperParametersError",
    "Monitor",
    "NonFiniteLossError",
    "Optimizer",
    "ProcessGroupScope",
    "RangeCurriculum",
    "RatioCurriculum",
    "Scheduler",
    "StepOutputError",
    "StepsCurriculum",
    "Trainer",
    "TrainerConfigError",
    "TrainerError",
    "iter_predictions",
    "load_predictions",
    "load_weights",
    "register_optimizer",
    "register_scheduler",
    "seed_everything",
    "stop_on_signals",
    "use_cpu",
]
