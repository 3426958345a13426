"""The accmt Trainer: write an AcceleratorModule, call ``Trainer.fit``, on Accelerate.

Packages built on accmt-trainer (accmt-search) import from ``accmt_trainer.integration``,
which adds to these names the few of the Trainer's parts they need."""

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
from .checkpointing import load_weights
from .config import (
    HyperParameters,
    Monitor,
    Optimizer,
    Scheduler,
    register_optimizer,
    register_scheduler,
)
from .data import (
    Curriculum,
    RangeCurriculum,
    RatioCurriculum,
    StepsCurriculum,
    TokenBudgetBatchSampler,
)
from .inference import iter_predictions, load_predictions
from .runtime import EXIT_RESUMABLE, exit_status, seed_everything

__all__ = [
    "EXIT_RESUMABLE",
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
    "RangeCurriculum",
    "RatioCurriculum",
    "RunHandle",
    "Scheduler",
    "StepOutputError",
    "StepsCurriculum",
    "TokenBudgetBatchSampler",
    "Trainer",
    "TrainerConfigError",
    "TrainerError",
    "exit_status",
    "iter_predictions",
    "load_predictions",
    "load_weights",
    "register_optimizer",
    "register_scheduler",
    "seed_everything",
]
