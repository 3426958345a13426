"""The accmt Trainer: write an AcceleratorModule, call ``Trainer.fit``, on Accelerate."""

from ._errors import (
    ArtifactNotFoundError,
    CheckpointError,
    HyperParametersError,
    NonFiniteLossError,
    StepOutputError,
    TrainerConfigError,
    TrainerError,
)
from ._module import AcceleratorModule, ExtendedAcceleratorModule, RunHandle
from ._trainer import Trainer
from .checkpointing import check_writable, load_weights
from .config import (
    HyperParameters,
    Monitor,
    Optimizer,
    Scheduler,
    register_optimizer,
    register_scheduler,
)
from .data import Curriculum, RangeCurriculum, RatioCurriculum, StepsCurriculum
from .inference import iter_predictions, load_predictions
from .runtime import ProcessGroupScope, seed_everything, stop_on_signals, use_cpu

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
    "RunHandle",
    "Scheduler",
    "StepOutputError",
    "StepsCurriculum",
    "Trainer",
    "TrainerConfigError",
    "TrainerError",
    "check_writable",
    "iter_predictions",
    "load_predictions",
    "load_weights",
    "register_optimizer",
    "register_scheduler",
    "seed_everything",
    "stop_on_signals",
    "use_cpu",
]
