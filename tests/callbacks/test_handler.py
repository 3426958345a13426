"""CallbackHandler driving the hand-written loop: hook order, binding, dispatch, errors."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import pytest

from accmt_callbacks import HOOKS, Callback, CallbackHandler, LambdaCallback
from accmt_state import TrainingState

from ._loop import MODULE, OPTIMIZER, SCHEDULER, TRAINING_STEP, FakeTrainer, Recorder, fit

BACKWARD = list(TRAINING_STEP[1:3])
OPTIMIZER_STEP = list(TRAINING_STEP[3:9])


def test_exact_hook_sequence_with_gradient_accumulation() -> None:
    recorder = Recorder()
    handler = CallbackHandler([recorder])
    fit(
        handler,
        TrainingState(),
        train=[1, 2, 3],
        valid={"valid": [10, 11], "test": [20]},
        epochs=2,
        accumulate=2,
    )
    # Batch 0 accumulates; batch 1 closes the window; batch 2 is the epoch's last and steps.
    epoch = [
        "on_epoch_start",
        "on_before_training_step",
        *BACKWARD,
        "on_after_training_step",
        "on_before_training_step",
        *BACKWARD,
        *OPTIMIZER_STEP,
        "on_after_training_step",
        "on_before_training_step",
        *BACKWARD,
        *OPTIMIZER_STEP,
        "on_after_training_step",
        "on_evaluation_start",
        "on_before_validation_step",
        "on_after_validation_step",
        "on_before_validation_step",
        "on_after_validation_step",
        "on_before_validation_step",
        "on_after_validation_step",
        "on_evaluation_end",
        "on_epoch_end",
    ]
    assert recorder.names() == ["on_fit_start", *epoch, *epoch, "on_fit_end"]


def test_hooks_receive_the_loop_arguments() -> None:
    recorder = Recorder()
    fit(CallbackHandler([recorder]), TrainingState(), train=[5], valid={"valid": [7]})
    received = {hook: args for hook, args in recorder.calls if args}
    assert received == {
        "on_before_training_step": (5,),
        "on_before_backward": (5.0,),
        "on_before_optimizer_step": (OPTIMIZER,),
        "on_after_optimizer_step": (OPTIMIZER,),
        "on_before_scheduler_step": (SCHEDULER,),
        "on_after_scheduler_step": (SCHEDULER,),
        "on_before_zero_grad": (OPTIMIZER,),
        "on_after_zero_grad": (OPTIMIZER,),
        "on_before_validation_step": (7,),
    }


def test_without_a_scheduler_its_hooks_do_not_fire() -> None:
    recorder = Recorder()
    fit(CallbackHandler([recorder]), TrainingState(), train=[1], scheduler=False)
    assert "on_before_scheduler_step" not in recorder.names()
    assert "on_before_zero_grad" in recorder.names()


class SeesBinding(Callback):
    def __init__(self) -> None:
        self.seen: list[tuple[str, Any, Any, Any, Any]] = []

    def _see(self, hook: str) -> None:
        self.seen.append((hook, self.module, self.trainer, self.state, self.handler))

    def on_fit_start(self) -> None:
        self._see("on_fit_start")

    def on_resume(self) -> None:
        self._see("on_resume")


def test_everything_is_bound_before_the_first_hook_and_on_resume() -> None:
    early, late = SeesBinding(), SeesBinding()
    handler = CallbackHandler([early])
    state, trainer = TrainingState(), FakeTrainer()
    handler.bind(module=MODULE, trainer=trainer, state=state)
    handler.add(late)  # added after bind: bound when added
    handler.call("on_resume")
    handler.call("on_fit_start")
    for callback in (early, late):
        assert callback.seen == [
            ("on_resume", MODULE, trainer, state, handler),
            ("on_fit_start", MODULE, trainer, state, handler),
        ]


def test_rebinding_replaces_the_state_everywhere() -> None:
    callback = Callback()
    handler = CallbackHandler([callback])
    handler.bind(state=TrainingState())
    restored = TrainingState()
    handler.bind(state=restored)
    assert callback.state is restored


def test_call_before_bind_is_refused_but_for_exception_hooks() -> None:
    recorder = Recorder()
    handler = CallbackHandler([recorder])
    for hook in ("on_fit_start", "on_resume", "on_after_training_step"):
        with pytest.raises(RuntimeError, match=rf"call\('{hook}'\) before bind\(\)"):
            handler.call(hook)
    late = Recorder()
    handler.add(late)  # added before bind: its exception hooks are live too
    error = ValueError("during setup")
    handler.call("on_exception", error)
    assert recorder.calls == late.calls == [("on_exception", (error,))]


def test_bind_needs_a_training_state() -> None:
    with pytest.raises(TypeError, match="TrainingState"):
        CallbackHandler().bind(state={"epoch": 0})  # type: ignore[arg-type]


def test_unknown_hook_is_a_clear_error() -> None:
    handler = CallbackHandler()
    handler.bind(state=TrainingState())
    with pytest.raises(ValueError, match="Did you mean 'on_epoch_end'") as info:
        handler.call("on_epoch_ends")
    assert "on_before_zero_grad" in str(info.value)


def test_hooks_run_in_list_order_and_only_on_overriders() -> None:
    order: list[str] = []

    class A(Callback):
        def on_epoch_start(self) -> None:
            order.append("A")

    class B(Callback):
        def on_epoch_end(self) -> None:
            order.append("B")

    class C(A):
        def on_epoch_start(self) -> None:
            order.append("C")

    handler = CallbackHandler([C(), B(), A()])
    handler.bind(state=TrainingState())
    handler.call("on_epoch_start")
    handler.call("on_epoch_end")
    assert order == ["C", "A", "B"]


def test_an_instance_attribute_counts_as_an_override() -> None:
    seen = []
    callback = Callback()
    callback.on_epoch_start = lambda: seen.append("instance")  # type: ignore[method-assign]
    handler = CallbackHandler([callback])
    handler.bind(state=TrainingState())
    handler.call("on_epoch_start")
    assert seen == ["instance"]


def python_calls(run: Callable[[], object]) -> int:
    """How many Python-level function calls ``run`` makes."""
    count = 0

    def profile(frame: Any, event: str, arg: Any) -> None:
        nonlocal count
        if event == "call":
            count += 1

    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
    return count


def one_step(handler: CallbackHandler) -> Callable[[], None]:
    def step() -> None:
        handler.call("on_before_training_step", 1)
        handler.call("on_before_backward", 1.0)
        handler.call("on_after_backward")
        for hook in (
            "on_before_optimizer_step",
            "on_after_optimizer_step",
            "on_before_zero_grad",
            "on_after_zero_grad",
        ):
            handler.call(hook, OPTIMIZER)
        handler.call("on_after_training_step")

    return step


def test_callbacks_that_override_nothing_cost_a_step_no_python_calls() -> None:
    empty, crowded = CallbackHandler(), CallbackHandler([Callback() for _ in range(20)])
    lambdas = CallbackHandler([LambdaCallback(on_fit_start=lambda cb: None) for _ in range(20)])
    for handler in (empty, crowded, lambdas):
        handler.bind(state=TrainingState())
    baseline = python_calls(one_step(empty))
    assert baseline == 9  # one per handler.call
    assert python_calls(one_step(crowded)) == baseline
    assert python_calls(one_step(lambdas)) == baseline


def test_overrides_are_resolved_when_added_not_per_call() -> None:
    class Late(Callback):
        pass

    handler = CallbackHandler([Late()])
    handler.bind(state=TrainingState())
    seen = []
    Late.on_epoch_start = lambda self: seen.append("patched")  # type: ignore[method-assign]
    handler.call("on_epoch_start")
    assert seen == []
    handler.add(Late())
    handler.call("on_epoch_start")
    assert seen == ["patched"]


class Boom(Callback):
    def on_after_backward(self) -> None:
        raise ValueError("boom")


def test_an_exception_in_a_callback_propagates_with_a_note() -> None:
    after = Recorder()
    handler = CallbackHandler([Recorder(), Boom(), after])
    handler.bind(state=TrainingState())
    with pytest.raises(ValueError, match="boom") as info:
        handler.call("on_after_backward")
    assert info.type is ValueError
    assert info.value.args == ("boom",)
    assert info.value.__notes__ == ["raised in on_after_backward by Boom (handler.callbacks[1])"]
    assert after.calls == []  # the callbacks after it are not called


def test_on_python_310_the_note_goes_into_dunder_notes() -> None:
    class NoAddNote(Exception):
        add_note = None  # what an exception looks like on Python 3.10

    class Raises(Callback):
        def on_epoch_end(self) -> None:
            raise NoAddNote("old python")

    handler = CallbackHandler([Raises()])
    handler.bind(state=TrainingState())
    with pytest.raises(NoAddNote) as info:
        handler.call("on_epoch_end")
    assert info.value.__notes__ == [
        f"raised in on_epoch_end by {Raises.__qualname__} (handler.callbacks[0])"
    ]


def test_a_failing_loop_hook_reaches_the_exception_hooks_and_is_reraised() -> None:
    recorder = Recorder()
    handler = CallbackHandler([recorder, Boom()])
    with pytest.raises(ValueError, match="boom") as info:
        fit(handler, TrainingState(), train=[1, 2])
    assert recorder.names()[-1] == "on_exception"
    assert recorder.calls[-1][1] == (info.value,)
    assert "on_fit_end" not in recorder.names()


def test_add_refuses_misuse() -> None:
    handler = CallbackHandler()
    with pytest.raises(TypeError, match="Callback instances"):
        handler.add(object())  # type: ignore[arg-type]
    callback = Callback()
    handler.add(callback)
    with pytest.raises(ValueError, match="already added"):
        handler.add(callback)

    class NotAMethod(Callback):
        on_epoch_end = 3  # type: ignore[assignment]

    with pytest.raises(TypeError, match="on_epoch_end must be a method"):
        handler.add(NotAMethod())
    assert handler.callbacks == (callback,)


def test_callbacks_is_a_tuple_in_order() -> None:
    first, second = Callback(), Recorder()
    handler = CallbackHandler([first])
    handler.add(second)
    assert handler.callbacks == (first, second)
    assert isinstance(handler.callbacks, tuple)
    assert first.handler is handler
    assert second.handler is handler
    assert "Recorder" in repr(handler)


def test_every_hook_can_be_called_by_name() -> None:
    recorder = Recorder()
    handler = CallbackHandler([recorder])
    handler.bind(state=TrainingState())
    for hook in HOOKS:
        handler.call(hook, *(["argument"] if recorder_arguments(hook) else []))
    assert recorder.names() == list(HOOKS)


def recorder_arguments(hook: str) -> bool:
    import inspect

    return len(inspect.signature(getattr(Callback, hook)).parameters) > 1
