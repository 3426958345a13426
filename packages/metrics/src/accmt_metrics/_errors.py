"""The one error a metric raises for bad input."""

from __future__ import annotations


class MetricError(ValueError):
    """Bad input to a metric, or a metric asked for a result it cannot give.

    The message always starts with the metric's class and name, for example
    ``Accuracy('accuracy'): predictions have 3 rows but references have 4``.
    """
