"""accmt 1.x's ``accmt.metrics``: its ``Metric``, ``MetricParallel`` and ``MetricBatch`` (a
subclass overrides ``compute(predictions, references)``), on the exact accmt-metrics base, and
every accmt-metrics built-in."""

from accmt_metrics import *  # noqa: F403
from accmt_metrics import __all__ as _metrics_all

from ._one_x._metrics import Metric as Metric
from ._one_x._metrics import MetricBatch as MetricBatch
from ._one_x._metrics import MetricParallel as MetricParallel

__all__ = sorted({*_metrics_all, "Metric", "MetricBatch", "MetricParallel"})
