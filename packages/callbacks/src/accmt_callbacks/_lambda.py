"""LambdaCallback: a callback made of a few functions, for one-off hooks."""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

from ._callback import HOOK_ARGUMENTS, HOOKS, Callback
from ._errors import CallbackTypeError


class LambdaCallback(Callback):
    """A callback whose hooks are the functions given by hook name.

    Each function is called like the method it stands for, the callback first (so that it can
    read ``callback.state``, ``callback.trainer`` and ``callback.module``) and then the hook's
    arguments::

        LambdaCallback(
            on_epoch_end=lambda callback: print("epoch", callback.state.epoch),
            on_before_backward=lambda callback, loss: losses.append(float(loss)),
        )

    Only the hooks given count as overridden, so the handler calls nothing else. A name that
    is not a hook, a value that is not callable, or a function that cannot take the hook's
    arguments fails here, at construction.
    """

    def __init__(self, **hooks: Callable[..., object]) -> None:
        unknown = sorted(set(hooks) - set(HOOKS))
        if unknown:
            raise CallbackTypeError(
                f"LambdaCallback got {', '.join(map(repr, unknown))}, which "
                f"{'is not a hook' if len(unknown) == 1 else 'are not hooks'}; the hooks are: "
                f"{', '.join(HOOKS)}"
            )
        for hook, function in hooks.items():
            _check_signature(hook, function)
            setattr(self, hook, types.MethodType(function, self))
        self.hooks: tuple[str, ...] = tuple(hooks)
        """The names of the hooks given."""

    def __repr__(self) -> str:
        return f"LambdaCallback({', '.join(self.hooks)})"


def _check_signature(hook: str, function: Any) -> None:
    if not callable(function):
        raise CallbackTypeError(
            f"LambdaCallback({hook}=...) takes a function, got {type(function).__name__}: "
            f"{function!r}"
        )
    # inspect costs milliseconds to import; only pay it when a LambdaCallback is made.
    import inspect

    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):  # some builtins have no signature to check
        return
    arguments = ("callback", *HOOK_ARGUMENTS[hook])
    try:
        signature.bind(*arguments)
    except TypeError as error:
        raise CallbackTypeError(
            f"LambdaCallback({hook}=...) is called as f({', '.join(arguments)}), which "
            f"{getattr(function, '__qualname__', repr(function))}{signature} cannot take: {error}"
        ) from None
