"""The accmt Trainer: write an AcceleratorModule, call ``Trainer.fit``, on Accelerate."""

from ._checkpoints import CheckpointError
from ._hyperparameters import HyperParameters, HyperParametersError
from ._module import AcceleratorModule, ExtendedAcceleratorModule
from ._monitor import Monitor
from ._names import Optimizer, Scheduler
from ._options import TrainerConfigError
from ._trainer import Trainer

__all__ = [
    "AcceleratorModule",
    "CheckpointError",
    "ExtendedAcceleratorModule",
    "HyperParameters",
    "HyperParametersError",
    "Monitor",
    "Optimizer",
    "Scheduler",
    "Trainer",
    "TrainerConfigError",
]
