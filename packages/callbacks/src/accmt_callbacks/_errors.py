"""Every error accmt-callbacks raises: one base class, each also the built-in that fits, so that
``except CallbackError`` and ``except ValueError`` (or ``TypeError``, ...) both work."""

from __future__ import annotations

from accmt_state import StateError


class CallbackError(Exception):
    """The base class of every error accmt-callbacks raises."""


class CallbackTypeError(CallbackError, TypeError):
    """Something of the wrong kind was handed to the callbacks or returned by one: a
    non-Callback given to a CallbackHandler, a hook that is not a method, a callback that
    overrides only one of ``state_dict`` / ``load_state_dict``, a ``state_key`` that is not a
    non-empty str, callback state that is not JSON data, a LambdaCallback function that cannot
    take its hook's arguments, or a monitored metric that is not a number."""


class CallbackValueError(CallbackError, ValueError):
    """An option or argument has a bad value: an EarlyStopping or PrintLogger option, a
    callback added twice, two stateful callbacks with one ``state_key``, or a hook name that is
    not a hook."""


class CallbackNotBoundError(CallbackError, RuntimeError):
    """A callback or handler was used before it was ready: a hook fired before
    ``handler.bind(...)``, or ``request_stop`` (or EarlyStopping) on a callback that is in no
    bound CallbackHandler."""


class MonitoredMetricError(CallbackError, ValueError):
    """EarlyStopping's ``monitor`` does not name exactly one metric of
    ``state.additional_metrics``; the message names the validation sets or metrics there are."""


class CallbackStateError(CallbackError, StateError):
    """Saved callback state does not match the callbacks, or is not valid for one: a file or
    mapping of the wrong shape, a missing or unknown ``state_key``, a bad value. Also an
    ``accmt_state.StateError`` (so a ValueError), with its ``file`` and ``problems``."""
