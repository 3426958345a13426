"""CallbackHandler: calls a hook by name on every callback that overrides it, in list order."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from accmt_state import StateError, TrainingState, converter, read_json, write_json

from ._callback import EXCEPTION_HOOKS, HOOKS, Callback
from ._errors import (
    CallbackNotBoundError,
    CallbackStateError,
    CallbackTypeError,
    CallbackValueError,
)

# For one hook, (what it resolves to, the note added to what it raises) for each callback that
# overrides it, in list order.
_Entries = tuple[tuple[Callable[..., object], str], ...]

_OVERRIDABLE = (*HOOKS, "state_dict", "load_state_dict")
_BASE_FUNCTIONS = {name: getattr(Callback, name) for name in _OVERRIDABLE}


def overridden(callback: Callback, name: str) -> Callable[..., object] | None:
    """What ``callback.<name>`` resolves to, or None where it is still ``Callback``'s no-op.

    Overrides count on the class and on the instance (a function set as an attribute).
    """
    resolved = getattr(callback, name)
    if getattr(resolved, "__func__", resolved) is _BASE_FUNCTIONS[name]:
        return None
    if not callable(resolved):
        raise CallbackTypeError(
            f"{type(callback).__qualname__}.{name} must be a method, got "
            f"{type(resolved).__name__}: {resolved!r}"
        )
    return resolved  # type: ignore[no-any-return]


def add_note(error: BaseException, note: str) -> None:
    """Attach ``note`` to ``error``: ``add_note`` on Python 3.11+, ``__notes__`` on 3.10.

    Python 3.10's tracebacks do not print ``__notes__``, but the list is there to inspect (and
    the ``exceptiongroup`` backport's traceback printer shows it).
    """
    add = getattr(error, "add_note", None)
    if add is not None:
        add(note)
        return
    try:
        notes = error.__dict__.setdefault("__notes__", [])
        notes.append(note)
    except AttributeError:  # an exception type without a __dict__: leave it as it is
        pass


def is_cuda_out_of_memory(error: BaseException) -> bool:
    """True for a CUDA out-of-memory error, told apart without importing torch."""
    if not isinstance(error, RuntimeError):
        return False
    torch = sys.modules.get("torch")
    if torch is not None:
        for owner in (torch, getattr(torch, "cuda", None)):
            kind = getattr(owner, "OutOfMemoryError", None)
            if isinstance(kind, type) and isinstance(error, kind):
                return True
    for kind in type(error).__mro__:
        if kind.__name__ == "OutOfMemoryError" and kind.__module__.split(".")[0] == "torch":
            return True
    return "CUDA out of memory" in str(error)


def exception_hook(error: BaseException) -> str:
    """The one exception hook that ``dispatch_exception`` fires for ``error``."""
    if is_cuda_out_of_memory(error):
        return "on_cuda_out_of_memory"
    if isinstance(error, RuntimeError):
        return "on_runtime_error"
    if isinstance(error, KeyboardInterrupt):
        return "on_keyboard_interrupt"
    return "on_exception"


class CallbackHandler:
    """Calls hooks by name on a list of callbacks: what a training loop talks to.

    The loop binds the handler to its module, trainer and TrainingState (``bind``), then fires
    ``call("on_fit_start")`` and the other hooks in the order the package README lists,
    ``dispatch_exception(error)`` when an exception ends the fit, and checks ``should_stop`` at
    its stopping points (the accmt Trainer: the end of each optimizer step).

    Which callbacks override which hook is resolved once, when a callback is added; a hook
    that no callback overrides costs one dict lookup per call. A callback changed afterwards
    (a method patched onto its class) keeps the hooks it had when it was added.
    """

    def __init__(self, callbacks: Iterable[Callback] = ()) -> None:
        self._callbacks: list[Callback] = []
        self._stateful: list[Callback] = []
        self._table: dict[str, _Entries] = dict.fromkeys(HOOKS, ())
        # What ``call`` reads: until ``bind``, the exception hooks only (a failure during setup
        # must still reach them); after it, the table itself.
        self._live: dict[str, _Entries] = {}
        self._refresh_unbound()
        self._binding: tuple[Any, Any, TrainingState] | None = None
        self.should_stop: bool = False
        """True once a stop was requested (:meth:`request_stop`); loops read it, and only
        :meth:`request_stop` and :meth:`clear_stop` change it."""
        self.stop_reason: str = ""
        """Why the first stop request was made ("" when none)."""
        for callback in callbacks:
            self.add(callback)

    def __repr__(self) -> str:
        names = ", ".join(type(callback).__qualname__ for callback in self._callbacks)
        return f"CallbackHandler([{names}])"

    @property
    def callbacks(self) -> tuple[Callback, ...]:
        """The callbacks, in the order hooks are called on them."""
        return tuple(self._callbacks)

    def add(self, callback: Callback) -> None:
        """Append ``callback``: its hooks are called after those already added.

        Sets ``callback.handler`` and, if the handler is bound, binds the callback too. Refuses
        a non-Callback, the same callback twice, a callback that overrides only one of
        ``state_dict`` / ``load_state_dict``, and a stateful callback whose ``state_key`` is
        already taken.
        """
        if not isinstance(callback, Callback):
            raise CallbackTypeError(
                f"CallbackHandler takes Callback instances, got {type(callback).__name__}: "
                f"{callback!r}"
            )
        if any(callback is present for present in self._callbacks):
            raise CallbackValueError(f"{callback!r} was already added to this CallbackHandler")
        hooks = {hook: overridden(callback, hook) for hook in HOOKS}
        saves = overridden(callback, "state_dict") is not None
        loads = overridden(callback, "load_state_dict") is not None
        if saves != loads:
            defined, missing = ("state_dict", "load_state_dict")[:: 1 if saves else -1]
            raise CallbackTypeError(
                f"{type(callback).__qualname__} overrides {defined}() but not {missing}(): a "
                "stateful callback defines both, so that what it saves is restored on resume"
            )
        if saves:
            self._check_unique_keys([*self._stateful, callback])
            self._stateful.append(callback)

        position = len(self._callbacks)
        self._callbacks.append(callback)
        callback.handler = self
        if self._binding is not None:
            callback.module, callback.trainer, callback.state = self._binding
        for hook, method in hooks.items():
            if method is not None:
                name = type(callback).__qualname__
                note = f"raised in {hook} by {name} (handler.callbacks[{position}])"
                self._table[hook] = (*self._table[hook], (method, note))
        if self._binding is None:
            self._refresh_unbound()

    def request_stop(self, reason: str) -> None:
        """Ask the loop to stop at its next stopping point; the one place a stop is requested
        (callbacks, a trainer, signal handlers and searches all come here). The first request's
        ``reason`` is kept in :attr:`stop_reason`."""
        if not self.should_stop:
            self.stop_reason = reason
        self.should_stop = True

    def clear_stop(self) -> None:
        """Forget the stop request; a loop calls it when a new fit starts."""
        self.should_stop, self.stop_reason = False, ""

    def bind(self, *, module: Any = None, trainer: Any = None, state: TrainingState) -> None:
        """Set ``module``, ``trainer`` and ``state`` on every callback, and on any added later.

        The loop calls it before the first hook; ``call`` refuses to fire any hook but the
        exception hooks before it. Call it again if the loop replaces its TrainingState object
        (after loading one from a checkpoint, for instance), so that callbacks see the one the
        loop updates.
        """
        if not isinstance(state, TrainingState):
            raise CallbackTypeError(
                f"CallbackHandler.bind(state=...) takes an accmt_state.TrainingState, got "
                f"{type(state).__name__}"
            )
        self._binding = (module, trainer, state)
        for callback in self._callbacks:
            callback.module, callback.trainer, callback.state = self._binding
        self._live = self._table

    def call(self, hook: str, /, *args: Any) -> None:
        """Call ``hook`` with ``args`` on every callback that overrides it, in list order.

        An exception raised by a callback propagates unchanged, with a note naming the callback
        and the hook; the callbacks after it are not called. Before ``bind`` only the exception
        hooks may be called; any other hook raises CallbackNotBoundError (a RuntimeError), and a
        name that is not a hook raises CallbackValueError (a ValueError).
        """
        try:
            entries = self._live[hook]
        except KeyError:
            raise self._call_error(hook) from None
        for method, note in entries:
            try:
                method(*args)
            except BaseException as error:
                add_note(error, note)
                raise

    def dispatch_exception(self, exc: BaseException) -> None:
        """Fire the one exception hook for ``exc``; the loop re-raises ``exc`` afterwards.

        ``on_cuda_out_of_memory`` for a CUDA out-of-memory error, ``on_runtime_error`` for any
        other RuntimeError, ``on_keyboard_interrupt`` for KeyboardInterrupt, ``on_exception``
        for anything else. Works before ``bind`` too (the callbacks' ``state`` is then None), so
        that a failure during setup still reaches them. If a callback raises here, that
        exception propagates, with ``exc`` as its context.
        """
        self.call(exception_hook(exc), exc)

    def state_dict(self) -> dict[str, Any]:
        """Every stateful callback's ``state_dict()``, keyed by its ``state_key``, as JSON data.

        Each is unstructured through ``accmt_state.converter`` (tuples become lists, attrs
        instances dicts, numpy and torch scalars numbers, non-finite floats tagged objects) and
        checked: anything else that is not JSON data raises, naming the callback and where in
        its state. Only callbacks that override ``state_dict`` are asked.
        """
        keys = self._check_unique_keys(self._stateful)
        states: dict[str, Any] = {}
        for key, callback in zip(keys, self._stateful, strict=True):
            try:
                raw = callback.state_dict()
            except BaseException as error:
                add_note(error, f"raised by {type(callback).__qualname__}.state_dict()")
                raise
            if not isinstance(raw, Mapping):
                raise CallbackTypeError(
                    f"{type(callback).__qualname__}.state_dict() must return a dict, got "
                    f"{type(raw).__name__}"
                )
            states[key] = _json_data(converter.unstructure(raw), key)
        return states

    def load_state_dict(self, states: Mapping[str, Any], *, strict: bool = True) -> None:
        """Give each stateful callback its entry of ``states`` (as made by ``state_dict``).

        Each entry is structured back through ``accmt_state.converter`` first, so that tagged
        non-finite floats are floats again, in memory as after a file.

        With ``strict`` (the default), a key of ``states`` that no callback has, or a stateful
        callback whose key ``states`` lacks, raises CallbackStateError (an
        ``accmt_state.StateError``) before any callback is touched; so does an entry that is not
        a dict. Without ``strict``, missing and unknown keys are skipped.
        """
        self._load(states, strict, None)

    def save_state(self, path: str | os.PathLike[str]) -> None:
        """Write ``state_dict()`` to ``path`` as JSON, atomically (``accmt_state.write_json``)."""
        write_json(path, self.state_dict())

    def load_state(self, path: str | os.PathLike[str], *, strict: bool = True) -> None:
        """Read a file written by ``save_state`` and ``load_state_dict`` it.

        A file that is missing, not JSON, not a JSON object, or that does not match the
        callbacks (as ``load_state_dict`` checks) raises CallbackStateError (an
        ``accmt_state.StateError``) naming it.
        """
        try:
            states = read_json(path)
        except StateError as error:
            raise CallbackStateError(error.summary, error.problems, error.file) from error
        self._load(states, strict, path)

    def _load(self, states: Any, strict: bool, file: str | os.PathLike[str] | None) -> None:
        if not isinstance(states, Mapping):
            raise CallbackStateError(
                "callback state must be a mapping (a JSON object) of state_key -> state, got "
                f"{type(states).__name__}",
                file=file,
            )
        keys = self._check_unique_keys(self._stateful)
        problems = [
            f"the state of {key!r} must be a dict (a JSON object), got {type(states[key]).__name__}"
            for key in keys
            if key in states and not isinstance(states[key], Mapping)
        ]
        if strict:
            problems += [f"no state for the callback {key!r}" for key in keys if key not in states]
            problems += [
                f"state for {key!r}, which no callback has" for key in states if key not in keys
            ]
        if problems:
            raise CallbackStateError(
                f"callback state does not match the stateful callbacks ({_listing(keys)})"
                + ("; pass strict=False to load what matches" if strict else ""),
                problems,
                file=file,
            )
        for key, callback in zip(keys, self._stateful, strict=True):
            if key not in states:
                continue
            # Structuring as Any turns tagged non-finite floats back into floats.
            state: Any = converter.structure(states[key], Any)
            try:
                callback.load_state_dict(state)
            except BaseException as error:
                add_note(error, f"raised by {type(callback).__qualname__}.load_state_dict()")
                raise

    def _refresh_unbound(self) -> None:
        self._live = {hook: self._table[hook] for hook in EXCEPTION_HOOKS}

    def _check_unique_keys(self, stateful: list[Callback]) -> list[str]:
        keys = [callback.state_key for callback in stateful]
        for index, key in enumerate(keys):
            if not isinstance(key, str) or not key:
                raise CallbackTypeError(
                    f"{type(stateful[index]).__qualname__}.state_key must be a non-empty str, "
                    f"got {key!r}"
                )
            if key in keys[:index]:
                first = keys.index(key)
                raise CallbackValueError(
                    f"two stateful callbacks share the state_key {key!r} "
                    f"({type(stateful[first]).__qualname__} and "
                    f"{type(stateful[index]).__qualname__}): their states would overwrite each "
                    "other in a checkpoint. Give one a distinct key by overriding the state_key "
                    "property."
                )
        return keys

    def _call_error(self, hook: object) -> Exception:
        if isinstance(hook, str) and hook in self._table:
            return CallbackNotBoundError(
                f"CallbackHandler.call({hook!r}) before bind(): call "
                "handler.bind(state=..., module=..., trainer=...) before the first hook, so "
                "that callbacks see the module, trainer and state"
            )
        import difflib

        close = difflib.get_close_matches(str(hook), HOOKS, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        return CallbackValueError(
            f"{hook!r} is not a callback hook.{hint} The hooks: {', '.join(HOOKS)}"
        )


def _listing(keys: Iterable[str]) -> str:
    return ", ".join(repr(key) for key in keys) or "(none)"


def _json_data(value: Any, where: str) -> Any:
    """A copy of ``value`` made of JSON types only; raises naming ``where`` otherwise."""
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, Mapping):
        copy: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise CallbackTypeError(
                    f"callback state {where} has the key {key!r} of type "
                    f"{type(key).__name__}; JSON object keys are strings"
                )
            copy[key] = _json_data(item, f"{where}.{key}")
        return copy
    if isinstance(value, (list, tuple)):
        return [_json_data(item, f"{where}[{index}]") for index, item in enumerate(value)]
    raise CallbackTypeError(
        f"callback state {where} has type {type(value).__name__} ({value!r:.80}), which is not "
        "JSON data (dict, list, str, int, float, bool, None)"
    )
