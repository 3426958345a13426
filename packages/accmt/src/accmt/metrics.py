"""accmt 1.x's ``accmt.metrics`` (now from accmt-metrics, exact across processes)."""

from accmt_metrics import *  # noqa: F403
from accmt_metrics import __all__ as __all__
