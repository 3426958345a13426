"""Evaluation metrics that are exact across processes.

Every metric drops, as each batch is added, the samples a distributed sampler repeated
(``num_samples`` or ``mask``), synchronises the processes once per ``compute()`` through
``torch.distributed``, and returns a dict of plain floats: on N processes, the result one
process would get over the same samples. The built-ins keep sums only (:class:`SummedMetric`),
so their memory does not grow with the evaluation set; a metric that needs the samples
themselves keeps one column entry per sample (:class:`PerSampleMetric`).
"""

from ._base import Metric
from ._classification import F1, Accuracy, Precision, Recall
from ._errors import MetricError
from ._mean import Mean
from ._per_sample import PerSampleMetric
from ._perplexity import Perplexity
from ._regression import MeanAbsoluteError, MeanSquaredError
from ._summed import SummedMetric
from ._torchmetrics import TorchMetricsAdapter

__all__ = [
    "F1",
    "Accuracy",
    "Mean",
    "MeanAbsoluteError",
    "MeanSquaredError",
    "Metric",
    "MetricError",
    "PerSampleMetric",
    "Perplexity",
    "Precision",
    "Recall",
    "SummedMetric",
    "TorchMetricsAdapter",
]
