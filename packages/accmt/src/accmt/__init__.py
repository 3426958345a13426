"""accmt: a PyTorch training framework on HuggingFace Accelerate.

This meta-package only re-exports its parts (accmt-decorators, accmt-state, accmt-callbacks,
accmt-metrics, accmt-trainer), so that ``from accmt import Trainer`` and accmt 1.x's import
paths keep working. Importing it builds nothing: no Accelerator, no process group.
"""

from accmt_callbacks import (
    HOOKS,
    Callback,
    CallbackHandler,
    EarlyStopping,
    LambdaCallback,
    PrintLogger,
)
from accmt_decorators import (
    NoProcessGroupError,
    ProcessInfo,
    current_process,
    local_main_process_first,
    main_process_first,
    on_last_process,
    on_local_main_process,
    on_local_process,
    on_main_process,
    on_process,
    wait_for_everyone,
)
from accmt_metrics import (
    F1,
    Accuracy,
    Mean,
    MeanAbsoluteError,
    MeanSquaredError,
    Metric,
    MetricError,
    Perplexity,
    Precision,
    Recall,
    TorchMetricsAdapter,
)
from accmt_state import SCHEMA_VERSION, StateError, TrainingState, register_migration
from accmt_trainer import (
    AcceleratorModule,
    CheckpointError,
    ExtendedAcceleratorModule,
    HyperParameters,
    HyperParametersError,
    Monitor,
    Optimizer,
    Scheduler,
    Trainer,
    TrainerConfigError,
)

__version__ = "2.0.0"

__all__ = [
    "F1",
    "HOOKS",
    "SCHEMA_VERSION",
    "AcceleratorModule",
    "Accuracy",
    "Callback",
    "CallbackHandler",
    "CheckpointError",
    "EarlyStopping",
    "ExtendedAcceleratorModule",
    "HyperParameters",
    "HyperParametersError",
    "LambdaCallback",
    "Mean",
    "MeanAbsoluteError",
    "MeanSquaredError",
    "Metric",
    "MetricError",
    "Monitor",
    "NoProcessGroupError",
    "Optimizer",
    "Perplexity",
    "Precision",
    "PrintLogger",
    "ProcessInfo",
    "Recall",
    "Scheduler",
    "StateError",
    "TorchMetricsAdapter",
    "Trainer",
    "TrainerConfigError",
    "TrainingState",
    "__version__",
    "current_process",
    "local_main_process_first",
    "main_process_first",
    "on_last_process",
    "on_local_main_process",
    "on_local_process",
    "on_main_process",
    "on_process",
    "register_migration",
    "wait_for_everyone",
]
