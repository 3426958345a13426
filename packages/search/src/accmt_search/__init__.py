"""accmt-search: hyperparameter search for the accmt Trainer, on optuna.

``HyperParameterSearch`` keeps accmt 1.x's API (``set_parameters``, ``optimize``) and adds a
study that survives (SQLite by default, any RDB URL for many machines), pruning through the
Trainer's stop request, N processes per trial, and spaces over any hyperparameter or argument of
the module, from a dict, a YAML file or a function of the trial.
"""

from ._errors import SearchConfigError, SearchError, SearchSpaceError, StudyError
from ._metrics import EvaluationMetrics, SetMetrics
from ._result import SearchResult
from ._search import HyperParameterSearch

__all__ = [
    "EvaluationMetrics",
    "HyperParameterSearch",
    "SearchConfigError",
    "SearchError",
    "SearchResult",
    "SearchSpaceError",
    "SetMetrics",
    "StudyError",
]
