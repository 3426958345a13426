"""Let one process go through a block first, the others after it (downloads, caches)."""

from __future__ import annotations

import functools
from collections.abc import Callable

from ._collective import wait_for_everyone
from ._errors import DecoratorUsageError
from ._process import ProcessInfo, current_process
from ._selectors import _is_coroutine_function
from ._typing import TYPE_CHECKING, overload

if TYPE_CHECKING:
    from types import TracebackType
    from typing import Any, ParamSpec, TypeVar

    P = ParamSpec("P")
    R = TypeVar("R")


class ProcessFirst:
    """A context manager and decorator: the chosen processes run the block, then the rest.

    On entry the other processes wait at a barrier; the chosen ones run the block and reach
    the barrier on exit, which lets the others in. Every process of the job must enter it.
    The choice is made on entry, not when the object is built.
    """

    def __init__(self, is_first: Callable[[ProcessInfo], bool], name: str) -> None:
        self._is_first = is_first
        self._name = name
        self._went_first: list[bool] = []

    def __enter__(self) -> None:
        went_first = self._is_first(current_process())
        self._went_first.append(went_first)
        if not went_first:
            wait_for_everyone()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._went_first.pop():
            wait_for_everyone()

    def __call__(self, func: Callable[P, R]) -> Callable[P, R]:
        if not callable(func):
            raise DecoratorUsageError(f"@{self._name} decorates a callable, got {func!r}")
        if _is_coroutine_function(func):
            coroutine_function: Callable[..., Any] = func

            @functools.wraps(func)
            async def run_async(*args: Any, **kwargs: Any) -> Any:
                with self:
                    return await coroutine_function(*args, **kwargs)

            return run_async  # type: ignore[return-value]

        @functools.wraps(func)
        def run(*args: P.args, **kwargs: P.kwargs) -> R:
            with self:
                return func(*args, **kwargs)

        return run


@overload
def main_process_first(func: Callable[P, R], /) -> Callable[P, R]: ...
@overload
def main_process_first() -> ProcessFirst: ...
def main_process_first(func: Any = None, /) -> Any:
    """The main process runs the block (or function) first; the others follow it.

    Use as ``with main_process_first():``, ``@main_process_first`` or ``@main_process_first()``.
    """
    first = ProcessFirst(lambda process: process.is_main_process, "main_process_first")
    return first if func is None else first(func)


@overload
def local_main_process_first(func: Callable[P, R], /) -> Callable[P, R]: ...
@overload
def local_main_process_first() -> ProcessFirst: ...
def local_main_process_first(func: Any = None, /) -> Any:
    """The first process of each machine runs the block first; the others follow them.

    Use as ``with local_main_process_first():``, ``@local_main_process_first`` or
    ``@local_main_process_first()``.
    """
    first = ProcessFirst(lambda process: process.is_local_main_process, "local_main_process_first")
    return first if func is None else first(func)
