"""The Callback base class: its hooks, their arguments and documentation, its attributes."""

from __future__ import annotations

import inspect

import pytest

from accmt_callbacks import HOOKS, Callback, CallbackHandler
from accmt_state import TrainingState

from ._loop import TRAINING_STEP

ISSUE_HOOKS = {
    "on_fit_start": [],
    "on_fit_end": [],
    "on_resume": [],
    "on_save_checkpoint": [],
    "on_epoch_start": [],
    "on_epoch_end": [],
    "on_evaluation_start": [],
    "on_evaluation_end": [],
    "on_before_training_step": ["batch"],
    "on_after_training_step": [],
    "on_before_validation_step": ["batch"],
    "on_after_validation_step": [],
    "on_before_backward": ["loss"],
    "on_after_backward": [],
    "on_before_optimizer_step": ["optimizer"],
    "on_after_optimizer_step": ["optimizer"],
    "on_before_scheduler_step": ["scheduler"],
    "on_after_scheduler_step": ["scheduler"],
    "on_before_zero_grad": ["optimizer"],
    "on_after_zero_grad": ["optimizer"],
    "on_runtime_error": ["exception"],
    "on_cuda_out_of_memory": ["exception"],
    "on_keyboard_interrupt": ["exception"],
    "on_exception": ["exception"],
}


def test_hooks_are_exactly_the_issue_hooks_with_their_arguments() -> None:
    assert sorted(HOOKS) == sorted(ISSUE_HOOKS)
    assert len(set(HOOKS)) == len(HOOKS)
    defined = sorted(name for name in vars(Callback) if name.startswith("on_"))
    assert defined == sorted(ISSUE_HOOKS)
    for hook, arguments in ISSUE_HOOKS.items():
        parameters = list(inspect.signature(getattr(Callback, hook)).parameters)
        assert parameters == ["self", *arguments], hook


@pytest.mark.parametrize("hook", HOOKS)
def test_every_hook_is_a_documented_no_op(hook: str) -> None:
    method = getattr(Callback(), hook)
    assert method(*[object()] * len(ISSUE_HOOKS[hook])) is None
    doc = inspect.getdoc(method) or ""
    assert doc.startswith("Fires "), f"{hook}: {doc!r}"


def test_attributes_are_none_until_bound_and_state_key_is_the_qualname() -> None:
    class Mine(Callback):
        pass

    mine = Mine()
    assert (mine.module, mine.trainer, mine.state, mine.handler) == (None, None, None, None)
    assert mine.state_key == Mine.__qualname__
    assert mine.state_dict() == {}
    assert mine.load_state_dict({"anything": 1}) is None


def test_request_stop_outside_a_handler_says_so() -> None:
    with pytest.raises(RuntimeError, match="not in a CallbackHandler"):
        Callback().request_stop("why")


def test_request_stop_sets_the_flag_reason_and_trainer_flag() -> None:
    class Trainer:
        should_stop = False

    first, second = Callback(), Callback()
    handler = CallbackHandler([first, second])
    trainer = Trainer()
    assert handler.should_stop is False
    assert handler.stop_reason == ""
    first.request_stop()
    assert handler.should_stop is True
    assert handler.stop_reason == "Callback requested a stop"
    second.request_stop("later reason")  # the first reason stands
    assert handler.stop_reason == "Callback requested a stop"

    handler.should_stop = False
    handler.stop_reason = ""
    handler.bind(trainer=trainer, state=TrainingState())
    second.request_stop("patience ran out")
    assert (handler.should_stop, handler.stop_reason) == (True, "patience ran out")
    assert trainer.should_stop is True


def test_request_stop_leaves_a_trainer_without_the_flag_alone() -> None:
    trainer = object()
    callback = Callback()
    handler = CallbackHandler([callback])
    handler.bind(trainer=trainer, state=TrainingState())
    callback.request_stop()
    assert handler.should_stop is True
    assert not hasattr(trainer, "should_stop")


def test_hooks_are_listed_in_the_order_a_training_step_fires_them() -> None:
    start = HOOKS.index("on_before_training_step")
    assert HOOKS[start : HOOKS.index("on_after_training_step") + 1] == TRAINING_STEP
    assert HOOKS[0] == "on_fit_start"


def test_the_handler_protocol_is_the_handler_s_public_surface() -> None:
    # Callback.handler is typed by the protocol (so that _callback.py need not import
    # _handler.py); users see every public name of CallbackHandler with its signature.
    from accmt_callbacks._callback import CallbackHandlerProtocol

    def public(cls: type) -> dict[str, str]:
        names = {name for name in vars(cls) if not name.startswith("_")}
        names |= set(getattr(cls, "__annotations__", {}))
        surface = {}
        for name in sorted(names):
            value = inspect.getattr_static(cls, name, None)
            if isinstance(value, property):
                value = value.fget
            surface[name] = str(inspect.signature(value)) if callable(value) else "attribute"
        return surface

    handler = public(CallbackHandler)
    handler |= {"should_stop": "attribute", "stop_reason": "attribute"}  # set in __init__
    assert public(CallbackHandlerProtocol) == handler
    assert set(CallbackHandlerProtocol.__annotations__) == {"should_stop", "stop_reason"}
    assert Callback.__annotations__["handler"] == "CallbackHandlerProtocol | None"
