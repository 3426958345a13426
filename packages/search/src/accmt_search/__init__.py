"""accmt-search: hyperparameter search for the accmt Trainer, on optuna.

``HyperParameterSearch`` searches a space over any hyperparameter or argument of the module
(``set_space``: a dict, a YAML file or a function of the trial) with ``optimize``, in a study
that survives (SQLite by default, any RDB URL for many machines), pruning through the Trainer's
stop request, on N processes per trial.
"""

from ._errors import (
    MetricNameError,
    SearchConfigError,
    SearchError,
    SearchSpaceError,
    StudyError,
)
from ._metrics import EvaluationMetrics, SetMetrics
from ._result import SearchResult
from ._search import HyperParameterSearch

__all__ = [
    "EvaluationMetrics",
    "HyperParameterSearch",
    "MetricNameError",
    "SearchConfigError",
    "SearchError",
    "SearchResult",
    "SearchSpaceError",
    "SetMetrics",
    "StudyError",
]
