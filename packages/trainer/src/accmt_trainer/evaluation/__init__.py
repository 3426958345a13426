"""Sets through a step and their metrics: the ``Evaluation`` both ``fit``'s validation and
``Trainer.evaluate`` use, the consolidated metrics, each set's metrics, what a step may return,
and losses kept on the device (a validation set's own, token-weighted with ``num_items``)."""

from ._consolidation import Extra, Predicate, make_consolidation
from ._evaluation import Evaluation, EvaluationOptions, Results
from ._loss_window import Items, LossWindow, TrainingLosses
from ._metric_sets import MetricsOption, metrics_per_set
from ._step_outputs import TrainingOutput, check_training_loss, split_training_output

__all__ = [
    "Evaluation",
    "EvaluationOptions",
    "Extra",
    "Items",
    "LossWindow",
    "MetricsOption",
    "Predicate",
    "Results",
    "TrainingLosses",
    "TrainingOutput",
    "check_training_loss",
    "make_consolidation",
    "metrics_per_set",
    "split_training_output",
]
