"""The accmt Callback contract and its dispatcher, usable from any training loop.

Depends on accmt-state and accmt-decorators only; importing it never imports torch.
"""

from ._callback import HOOKS, Callback
from ._early_stopping import EarlyStopping
from ._handler import CallbackHandler
from ._lambda import LambdaCallback
from ._print_logger import PrintLogger

__all__ = [
    "HOOKS",
    "Callback",
    "CallbackHandler",
    "EarlyStopping",
    "LambdaCallback",
    "PrintLogger",
]
