"""accmt-decorators in one process: forms, metadata, misuse. Real multi-process runs are in
tests/distributed/test_decorators.py."""

from __future__ import annotations

import asyncio
import inspect

import pytest

from accmt_decorators import (
    current_process,
    on_last_process,
    on_local_main_process,
    on_local_process,
    on_main_process,
    on_process,
)

ALL_FORMS = [
    on_main_process,
    on_main_process(),
    on_main_process(broadcast=True),
    on_local_main_process,
    on_local_main_process(),
    on_last_process,
    on_last_process(broadcast=True),
    on_process(0),
    on_process(process_index=0),
    on_process(0, broadcast=True),
    on_local_process(0),
    on_local_process(local_process_index=0, broadcast=True),
]


@pytest.fixture(autouse=True)
def single_process(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "SLURM_PROCID"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize("decorator", ALL_FORMS)
def test_every_form_runs_on_a_single_process(decorator: object) -> None:
    calls = []

    @decorator  # type: ignore[operator]
    def add(a: int, b: int = 2) -> int:
        calls.append((a, b))
        return a + b

    assert add(1, b=3) == 4
    assert calls == [(1, 3)]


def test_metadata_and_signature_are_kept() -> None:
    def scale(x: float, *, factor: float = 2.0) -> float:
        """Scale x."""
        return x * factor

    for decorator in ALL_FORMS:
        wrapped = decorator(scale)  # type: ignore[operator]
        assert wrapped.__name__ == "scale"
        assert wrapped.__doc__ == "Scale x."
        assert wrapped.__wrapped__ is scale
        assert inspect.signature(wrapped) == inspect.signature(scale)


def test_methods_static_and_class_methods() -> None:
    class Logger:
        def __init__(self) -> None:
            self.lines: list[str] = []

        @on_main_process
        def log(self, line: str) -> None:
            self.lines.append(line)

        @on_main_process
        @staticmethod
        def static_outer() -> str:
            return "static outer"

        @staticmethod
        @on_last_process
        def static_inner() -> str:
            return "static inner"

        @on_process(0)
        @classmethod
        def class_outer(cls) -> str:
            return cls.__name__

        @classmethod
        @on_process(0)
        def class_inner(cls) -> str:
            return cls.__name__

    logger = Logger()
    logger.log("a")
    assert logger.lines == ["a"]
    assert Logger.static_outer() == "static outer"
    assert logger.static_inner() == "static inner"
    assert Logger.class_outer() == "Logger"
    assert logger.class_inner() == "Logger"


def test_async_functions_stay_coroutine_functions() -> None:
    @on_main_process
    async def fetch(x: int) -> int:
        await asyncio.sleep(0)
        return x + 1

    @on_process(0, broadcast=True)
    async def fetch_all(x: int) -> int:
        return x * 2

    assert inspect.iscoroutinefunction(fetch)
    assert asyncio.run(fetch(1)) == 2
    assert asyncio.run(fetch_all(4)) == 8


def test_on_process_without_index_fails_at_decoration() -> None:
    with pytest.raises(TypeError, match=r"on_process needs the process_index"):

        @on_process  # type: ignore[call-overload]
        def f() -> None: ...

    with pytest.raises(TypeError, match=r"on_process needs the process_index"):
        on_process()  # type: ignore[call-overload]
    with pytest.raises(TypeError, match=r"on_local_process needs the local_process_index"):
        on_local_process()  # type: ignore[call-overload]


@pytest.mark.parametrize("bad", [-1, -7])
def test_negative_index_fails_at_decoration(bad: int) -> None:
    with pytest.raises(ValueError, match=rf"must be 0 or more, got {bad}"):
        on_process(bad)
    with pytest.raises(ValueError, match=rf"must be 0 or more, got {bad}"):
        on_local_process(bad)


@pytest.mark.parametrize("bad", [True, 1.0, "1"])
def test_non_int_index_fails_at_decoration(bad: object) -> None:
    with pytest.raises(TypeError, match="must be an int"):
        on_process(bad)  # type: ignore[call-overload]


def test_non_callable_fails_at_decoration() -> None:
    with pytest.raises(TypeError, match="decorates a callable"):
        on_main_process()(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="decorates a callable"):
        on_process(0)("not a function")  # type: ignore[arg-type]


def test_index_beyond_job_fails_at_call_time_not_decoration() -> None:
    @on_process(3)
    def f() -> None: ...

    @on_local_process(1)
    def g() -> None: ...

    with pytest.raises(ValueError, match=r"on_process\(3\) .* job of 1 process"):
        f()
    with pytest.raises(ValueError, match=r"on_local_process\(1\) .* running 1 process"):
        g()


def test_choice_is_made_at_call_time(monkeypatch: pytest.MonkeyPatch) -> None:
    # Only the resolution order is checked here, from environment variables; behaviour across
    # real processes is tested in tests/distributed/.
    ran = []

    @on_main_process
    def f() -> None:
        ran.append(current_process().process_index)

    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    f()
    monkeypatch.setenv("RANK", "0")
    f()
    assert ran == [0]


def test_exceptions_propagate_unchanged() -> None:
    @on_main_process
    def fail() -> None:
        raise KeyError("k")

    with pytest.raises(KeyError, match="k"):
        fail()


def test_main_process_first_decorates_async_functions() -> None:
    from accmt_decorators import main_process_first

    @main_process_first
    async def load() -> str:
        return "loaded"

    assert inspect.iscoroutinefunction(load)
    assert asyncio.run(load()) == "loaded"
