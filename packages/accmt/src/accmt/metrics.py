"""accmt 1.x's ``accmt.metrics`` (now from accmt-metrics, exact across processes)."""

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
