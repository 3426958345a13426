"""Sets through a step and their metrics: the ``Evaluation`` both ``fit``'s validation and
``Trainer.evaluate`` use, the consolidated metrics, each set's metrics, what a step may return,
losses kept on the device (a validation set's own, token-weighted with ``num_items``), and
flattened batches taken apart per document."""

from ._consolidation import Extra, Predicate
from ._documents import take_documents, without_documents
from ._evaluation import Evaluation, EvaluationOptions, Results
from ._loss_window import Items, TrainingLosses, scalar
from ._metric_sets import MetricsOption, metrics_per_set
from ._step_outputs import split_training_output

__all__ = [
    "Evaluation",
    "EvaluationOptions",
    "Extra",
    "Items",
    "MetricsOption",
    "Predicate",
    "Results",
    "TrainingLosses",
    "metrics_per_set",
    "scalar",
    "split_training_output",
    "take_documents",
    "without_documents",
]
