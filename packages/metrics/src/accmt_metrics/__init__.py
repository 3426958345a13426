"""Evaluation metrics that are exact across processes.

Every metric accumulates this process's batches, synchronises the processes once per
``compute()`` through ``torch.distributed``, drops the samples a distributed sampler repeated
(``num_samples`` or ``mask``), and returns a dict of plain floats: on N processes, the result
one process would get over the same samples.
"""

from ._base import Metric
from ._classification import F1, Accuracy, Precision, Recall
from ._errors import MetricError
from ._mean import Mean
from ._perplexity import Perplexity
from ._regression import MeanAbsoluteError, MeanSquaredError
from ._torchmetrics import TorchMetricsAdapter

__all__ = [
    "F1",
    "Accuracy",
    "Mean",
    "MeanAbsoluteError",
    "MeanSquaredError",
    "Metric",
    "MetricError",
    "Perplexity",
    "Precision",
    "Recall",
    "TorchMetricsAdapter",
]
