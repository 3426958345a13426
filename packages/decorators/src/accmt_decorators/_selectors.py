"""Decorators that run a function only on chosen processes, chosen when it is called."""

from __future__ import annotations

import functools
from collections.abc import Callable

from ._collective import gather_objects
from ._errors import BroadcastError, DecoratorUsageError, ProcessIndexError
from ._process import ProcessInfo, current_process
from ._typing import TYPE_CHECKING, overload

if TYPE_CHECKING:
    from typing import Any, Literal, ParamSpec, TypeVar

    P = ParamSpec("P")
    R = TypeVar("R")

# Given the calling process, the global index of the process chosen to run for it.
Chooser = Callable[[ProcessInfo], int]


class _Failed:
    """What the chosen process sends in place of a result when the function raised."""

    def __init__(self, description: str) -> None:
        self.description = description

    def __str__(self) -> str:
        return self.description


def _is_coroutine_function(func: Any) -> bool:
    # inspect costs ~10 ms to import, a third of this package's import budget, and is needed
    # only once something is decorated.
    import inspect

    return inspect.iscoroutinefunction(func)


def _main(process: ProcessInfo) -> int:
    return 0


def _last(process: ProcessInfo) -> int:
    return process.num_processes - 1


def _local_main(process: ProcessInfo) -> int:
    return process.process_index - process.local_process_index


def _global_index(index: int) -> Chooser:
    def choose(process: ProcessInfo) -> int:
        if index >= process.num_processes:
            raise ProcessIndexError(
                f"on_process({index}) was called in a job of {process.num_processes} "
                f"process(es), whose indices are 0 to {process.num_processes - 1}"
            )
        return index

    return choose


def _local_index(index: int) -> Chooser:
    def choose(process: ProcessInfo) -> int:
        if index >= process.num_local_processes:
            raise ProcessIndexError(
                f"on_local_process({index}) was called on a machine running "
                f"{process.num_local_processes} process(es), whose local indices are 0 to "
                f"{process.num_local_processes - 1}"
            )
        return process.process_index - process.local_process_index + index

    return choose


def _wrap(func: Any, choose: Chooser, broadcast: bool, decorator: str) -> Any:
    """Wrap ``func`` (a function, coroutine function, staticmethod or classmethod)."""
    if isinstance(func, (staticmethod, classmethod)):
        return type(func)(_wrap(func.__func__, choose, broadcast, decorator))
    if not callable(func):
        raise DecoratorUsageError(
            f"@{decorator} decorates a callable, got {type(func).__name__}: {func!r}"
        )
    if _is_coroutine_function(func):

        @functools.wraps(func)
        async def run_async(*args: Any, **kwargs: Any) -> Any:
            process = current_process()
            chosen = choose(process)
            if chosen != process.process_index:
                return _receive(chosen, process) if broadcast else None
            if not broadcast:
                return await func(*args, **kwargs)
            try:
                result = await func(*args, **kwargs)
            except BaseException as error:
                _send_failure(error, process)
                raise
            return _send(result, process)

        return run_async

    @functools.wraps(func)
    def run(*args: Any, **kwargs: Any) -> Any:
        process = current_process()
        chosen = choose(process)
        if chosen != process.process_index:
            return _receive(chosen, process) if broadcast else None
        if not broadcast:
            return func(*args, **kwargs)
        try:
            result = func(*args, **kwargs)
        except BaseException as error:
            _send_failure(error, process)
            raise
        return _send(result, process)

    return run


# Broadcasting is one all-gather that every process enters, the chosen one even when its
# function raised: otherwise the others would wait for it forever.


def _send(result: Any, process: ProcessInfo) -> Any:
    gather_objects(result, process)
    return result


def _send_failure(error: BaseException, process: ProcessInfo) -> None:
    gather_objects(_Failed(f"{type(error).__name__}: {error}"), process)


def _receive(chosen: int, process: ProcessInfo) -> Any:
    received = gather_objects(None, process)[chosen]
    if isinstance(received, _Failed):
        raise BroadcastError(f"process {chosen}, whose result was broadcast, raised {received}")
    return received


def _validate_index(index: object, decorator: str, name: str) -> int:
    if callable(index) or index is None:
        raise DecoratorUsageError(
            f"@{decorator} needs the {name} to run on, as in @{decorator}(0) or "
            f"@{decorator}({name}=0)"
        )
    if isinstance(index, bool) or not isinstance(index, int):
        raise DecoratorUsageError(
            f"@{decorator}: {name} must be an int, got {type(index).__name__}"
        )
    if index < 0:
        raise ProcessIndexError(f"@{decorator}: {name} must be 0 or more, got {index}")
    return index


def _selector(
    func: Any, choose: Chooser, broadcast: bool, decorator: str
) -> Callable[[Any], Any] | Any:
    if func is not None:
        return _wrap(func, choose, broadcast, decorator)
    return lambda f: _wrap(f, choose, broadcast, decorator)


@overload
def on_main_process(func: Callable[P, R], /) -> Callable[P, R | None]: ...
@overload
def on_main_process(
    *, broadcast: Literal[False] = False
) -> Callable[[Callable[P, R]], Callable[P, R | None]]: ...
@overload
def on_main_process(*, broadcast: Literal[True]) -> Callable[[Callable[P, R]], Callable[P, R]]: ...
def on_main_process(func: Any = None, /, *, broadcast: bool = False) -> Any:
    """Run the function on the main process (global index 0) only.

    Works bare (``@on_main_process``) or called (``@on_main_process()``). Elsewhere the call
    returns None without running. With ``broadcast=True`` every process returns the main
    process's result; then every process must make the call, since it is a collective.
    """
    return _selector(func, _main, broadcast, "on_main_process")


@overload
def on_local_main_process(func: Callable[P, R], /) -> Callable[P, R | None]: ...
@overload
def on_local_main_process(
    *, broadcast: Literal[False] = False
) -> Callable[[Callable[P, R]], Callable[P, R | None]]: ...
@overload
def on_local_main_process(
    *, broadcast: Literal[True]
) -> Callable[[Callable[P, R]], Callable[P, R]]: ...
def on_local_main_process(func: Any = None, /, *, broadcast: bool = False) -> Any:
    """Run the function on the first process of each machine (local index 0) only.

    With ``broadcast=True`` every process returns the result of its own machine's local main
    process; every process must make the call.
    """
    return _selector(func, _local_main, broadcast, "on_local_main_process")


@overload
def on_last_process(func: Callable[P, R], /) -> Callable[P, R | None]: ...
@overload
def on_last_process(
    *, broadcast: Literal[False] = False
) -> Callable[[Callable[P, R]], Callable[P, R | None]]: ...
@overload
def on_last_process(*, broadcast: Literal[True]) -> Callable[[Callable[P, R]], Callable[P, R]]: ...
def on_last_process(func: Any = None, /, *, broadcast: bool = False) -> Any:
    """Run the function on the process with the highest global index only.

    With ``broadcast=True`` every process returns its result; every process must make the call.
    """
    return _selector(func, _last, broadcast, "on_last_process")


@overload
def on_process(
    process_index: int, *, broadcast: Literal[False] = False
) -> Callable[[Callable[P, R]], Callable[P, R | None]]: ...
@overload
def on_process(
    process_index: int, *, broadcast: Literal[True]
) -> Callable[[Callable[P, R]], Callable[P, R]]: ...
def on_process(process_index: Any = None, *, broadcast: bool = False) -> Any:
    """Run the function on the process with global index ``process_index`` only.

    An index that is not a non-negative int fails at decoration time; an index at or beyond the
    number of processes fails when the function is called. With ``broadcast=True`` every
    process returns its result; every process must make the call.
    """
    index = _validate_index(process_index, "on_process", "process_index")
    return _selector(None, _global_index(index), broadcast, "on_process")


@overload
def on_local_process(
    local_process_index: int, *, broadcast: Literal[False] = False
) -> Callable[[Callable[P, R]], Callable[P, R | None]]: ...
@overload
def on_local_process(
    local_process_index: int, *, broadcast: Literal[True]
) -> Callable[[Callable[P, R]], Callable[P, R]]: ...
def on_local_process(local_process_index: Any = None, *, broadcast: bool = False) -> Any:
    """Run the function on the process with local index ``local_process_index`` of each machine.

    With ``broadcast=True`` every process returns the result of that process on its own
    machine; every process must make the call.
    """
    index = _validate_index(local_process_index, "on_local_process", "local_process_index")
    return _selector(None, _local_index(index), broadcast, "on_local_process")
