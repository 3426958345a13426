"""accmt 1.x's ``accmt.callbacks`` (now from accmt-callbacks)."""

from accmt_callbacks import (
    HOOKS,
    Callback,
    CallbackHandler,
    EarlyStopping,
    LambdaCallback,
    PrintLogger,
)

__all__ = ["HOOKS", "Callback", "CallbackHandler", "EarlyStopping", "LambdaCallback", "PrintLogger"]
