"""The accmt Callback contract and its dispatcher, usable from any training loop.

Depends on accmt-state and accmt-decorators only; importing it never imports torch.
"""

from ._callback import HOOKS, Callback
from ._early_stopping import EarlyStopping
from ._errors import (
    CallbackError,
    CallbackNotBoundError,
    CallbackStateError,
    CallbackTypeError,
    CallbackValueError,
    MonitoredMetricError,
)
from ._handler import CallbackHandler
from ._lambda import LambdaCallback
from ._print_logger import PrintLogger

__all__ = [
    "HOOKS",
    "Callback",
    "CallbackError",
    "CallbackHandler",
    "CallbackNotBoundError",
    "CallbackStateError",
    "CallbackTypeError",
    "CallbackValueError",
    "EarlyStopping",
    "LambdaCallback",
    "MonitoredMetricError",
    "PrintLogger",
]
