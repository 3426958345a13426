"""dispatch_exception fires exactly one hook, chosen by the exception's type, without torch."""

from __future__ import annotations

import sys
import types

import pytest

from accmt_callbacks import CallbackHandler
from accmt_state import TrainingState

from ._loop import Recorder, fit

EXCEPTION_HOOKS = {
    "on_cuda_out_of_memory",
    "on_runtime_error",
    "on_keyboard_interrupt",
    "on_exception",
}


def routed(error: BaseException) -> list[str]:
    recorder = Recorder()
    handler = CallbackHandler([recorder])
    handler.bind(state=TrainingState())
    assert handler.dispatch_exception(error) is None  # the loop re-raises, not the handler
    assert all(args == (error,) for _, args in recorder.calls)
    return recorder.names()


class OutOfMemoryError(RuntimeError):
    """Named like torch's, and claiming to come from torch (torch is not imported here)."""


OutOfMemoryError.__module__ = "torch.cuda"


class UnrelatedOutOfMemoryError(RuntimeError):
    """Same name, not torch's."""


UnrelatedOutOfMemoryError.__name__ = "OutOfMemoryError"


@pytest.mark.parametrize(
    ("error", "hook"),
    [
        (OutOfMemoryError("allocation failed"), "on_cuda_out_of_memory"),
        (RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB"), "on_cuda_out_of_memory"),
        (UnrelatedOutOfMemoryError("no"), "on_runtime_error"),
        (RuntimeError("shape mismatch"), "on_runtime_error"),
        (NotImplementedError("a RuntimeError subclass"), "on_runtime_error"),
        (KeyboardInterrupt(), "on_keyboard_interrupt"),
        (ValueError("bad"), "on_exception"),
        (MemoryError(), "on_exception"),
        (SystemExit(2), "on_exception"),
    ],
)
def test_each_exception_type_fires_exactly_its_hook(error: BaseException, hook: str) -> None:
    assert routed(error) == [hook]


def test_torch_oom_types_are_recognised_when_torch_is_imported(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A stand-in for an imported torch: its OutOfMemoryError has a name nothing else would match.
    class Oom(RuntimeError):
        pass

    class CudaOom(RuntimeError):
        pass

    torch = types.ModuleType("torch")
    torch.OutOfMemoryError = Oom  # type: ignore[attr-defined]
    torch.cuda = types.SimpleNamespace(OutOfMemoryError=CudaOom)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torch", torch)
    assert routed(Oom("out of memory")) == ["on_cuda_out_of_memory"]
    assert routed(CudaOom("out of memory")) == ["on_cuda_out_of_memory"]
    assert routed(RuntimeError("other")) == ["on_runtime_error"]


@pytest.mark.parametrize(
    ("error", "hook"),
    [
        (OutOfMemoryError("CUDA out of memory"), "on_cuda_out_of_memory"),
        (RuntimeError("expected scalar type Float"), "on_runtime_error"),
        (KeyboardInterrupt(), "on_keyboard_interrupt"),
        (ZeroDivisionError("loss"), "on_exception"),
    ],
)
def test_an_exception_in_the_loop_fires_its_hook_then_is_reraised(
    error: BaseException, hook: str
) -> None:
    recorder = Recorder()

    def fail(state: TrainingState) -> None:
        if state.train_step == 1:
            raise error

    with pytest.raises(type(error)) as info:
        fit(CallbackHandler([recorder]), TrainingState(), train=[1, 2, 3], fail=fail)
    assert info.value is error
    names = recorder.names()
    assert [name for name in names if name in EXCEPTION_HOOKS] == [hook]
    assert names[-1] == hook
    assert names.count("on_after_training_step") == 1
    assert "on_fit_end" not in names


def test_dispatch_works_before_bind() -> None:
    recorder = Recorder()
    CallbackHandler([recorder]).dispatch_exception(ValueError("during setup"))
    assert recorder.names() == ["on_exception"]
    assert recorder.state is None


def test_a_failing_exception_hook_propagates_with_the_original_as_context() -> None:
    class Broken(Recorder):
        def on_runtime_error(self, exception: RuntimeError) -> None:
            raise OSError("disk full while reporting")

    handler = CallbackHandler([Broken()])
    original = RuntimeError("original")

    def loop() -> None:
        try:
            raise original
        except RuntimeError as error:
            handler.dispatch_exception(error)
            raise

    with pytest.raises(OSError, match="disk full") as info:
        loop()
    assert info.value.__context__ is original
    assert info.value.__notes__ == [
        f"raised in on_runtime_error by {Broken.__qualname__} (handler.callbacks[0])"
    ]
