"""Every error accmt-decorators raises is a DecoratorError and the built-in that fits, so that
callers can catch either."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

import accmt_decorators
from accmt_decorators import (
    BroadcastError,
    DecoratorError,
    DecoratorUsageError,
    FrozenProcessInfoError,
    LauncherEnvironmentError,
    NoProcessGroupError,
    ProcessIndexError,
    current_process,
    on_main_process,
    on_process,
    wait_for_everyone,
)

BUILTINS = (ValueError, TypeError, RuntimeError, AttributeError)
ERRORS = [
    value
    for name in accmt_decorators.__all__
    if isinstance(value := getattr(accmt_decorators, name), type)
    and issubclass(value, BaseException)
]


@pytest.fixture(autouse=True)
def single_process(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "SLURM_PROCID"):
        monkeypatch.delenv(name, raising=False)


def test_every_public_error_is_a_decorator_error_and_a_builtin() -> None:
    assert DecoratorError in ERRORS
    assert len(ERRORS) == 7
    for error in ERRORS:
        assert issubclass(error, DecoratorError), error
        if error is not DecoratorError:
            assert issubclass(error, BUILTINS), error
        assert error.__module__ == "accmt_decorators._errors"


@pytest.mark.parametrize("error", ERRORS)
def test_errors_pickle(error: type[Exception]) -> None:
    # Errors cross process boundaries (a distributed job's workers report them by pickle).
    copy = pickle.loads(pickle.dumps(error("message")))
    assert type(copy) is error
    assert str(copy) == "message"


def test_misuse_at_decoration_is_a_type_error() -> None:
    with pytest.raises(DecoratorUsageError, match="decorates a callable") as caught:
        on_main_process(3)  # type: ignore[call-overload]
    assert isinstance(caught.value, TypeError)
    with pytest.raises(TypeError, match="must be an int") as wrong_type:
        on_process("0")  # type: ignore[call-overload]
    assert type(wrong_type.value) is DecoratorUsageError


def test_bad_indices_are_value_errors() -> None:
    with pytest.raises(ValueError, match="must be 0 or more") as caught:
        on_process(-1)
    assert type(caught.value) is ProcessIndexError

    @on_process(2)
    def f() -> None: ...

    with pytest.raises(DecoratorError, match=r"on_process\(2\)") as caught:
        f()
    assert type(caught.value) is ProcessIndexError
    assert isinstance(caught.value, ValueError)


def test_bad_launcher_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RANK", "zero")
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(LauncherEnvironmentError, match=r"RANK='zero'") as caught:
        current_process()
    assert isinstance(caught.value, ValueError)


def test_barrier_without_a_process_group(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.delenv("MASTER_PORT", raising=False)
    with pytest.raises(RuntimeError, match="needs a process group") as caught:
        wait_for_everyone()
    # The launcher's rendezvous is incomplete: the error names what is missing.
    assert "environment has no MASTER_PORT to make one" in str(caught.value)
    assert type(caught.value) is NoProcessGroupError
    assert isinstance(caught.value, DecoratorError)


def test_a_failed_broadcast_is_a_runtime_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from accmt_decorators import _selectors

    def gather(value: Any, process: Any) -> list[Any]:
        return [_selectors._Failed("KeyError: 'k'"), value]

    monkeypatch.setattr(_selectors, "gather_objects", gather)
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")

    @on_main_process(broadcast=True)
    def pick() -> str:
        return "run"

    with pytest.raises(BroadcastError, match=r"process 0, .* raised KeyError: 'k'") as caught:
        pick()
    assert isinstance(caught.value, RuntimeError)


def test_process_info_is_frozen() -> None:
    process = current_process()
    with pytest.raises(AttributeError, match="immutable") as caught:
        process.process_index = 3  # type: ignore[misc]
    assert type(caught.value) is FrozenProcessInfoError
    assert isinstance(caught.value, DecoratorError)
