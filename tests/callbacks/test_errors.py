"""Every error accmt-callbacks raises is a CallbackError and the built-in that fits, so that
callers can catch either."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

import accmt_callbacks
from accmt_callbacks import (
    Callback,
    CallbackError,
    CallbackHandler,
    CallbackNotBoundError,
    CallbackStateError,
    CallbackTypeError,
    CallbackValueError,
    EarlyStopping,
    LambdaCallback,
    MonitoredMetricError,
    PrintLogger,
)
from accmt_state import StateError, TrainingState

BUILTINS = (ValueError, TypeError, RuntimeError)
ERRORS = [
    value
    for name in accmt_callbacks.__all__
    if isinstance(value := getattr(accmt_callbacks, name), type)
    and issubclass(value, BaseException)
]


def test_every_public_error_is_a_callback_error_and_a_builtin() -> None:
    assert CallbackError in ERRORS
    assert len(ERRORS) == 6
    for error in ERRORS:
        assert issubclass(error, CallbackError), error
        if error is not CallbackError:
            assert issubclass(error, BUILTINS), error
        assert error.__module__ == "accmt_callbacks._errors"
    assert issubclass(CallbackStateError, StateError)


@pytest.mark.parametrize("error", [e for e in ERRORS if e is not CallbackStateError])
def test_errors_pickle(error: type[Exception]) -> None:
    copy = pickle.loads(pickle.dumps(error("message")))
    assert (type(copy), str(copy)) == (error, "message")


def test_callback_state_error_pickles_with_its_parts() -> None:
    error = CallbackStateError("callback state does not match", ["no state for 'A'"], "cb.json")
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is CallbackStateError
    assert (copy.summary, copy.problems, copy.file, str(copy)) == (
        error.summary,
        error.problems,
        error.file,
        str(error),
    )


def test_wrong_kinds_are_type_errors() -> None:
    with pytest.raises(TypeError, match="takes Callback instances") as caught:
        CallbackHandler([object()])  # type: ignore[list-item]
    assert type(caught.value) is CallbackTypeError
    with pytest.raises(CallbackTypeError, match="'on_nothing', which is not a hook") as lambda_:
        LambdaCallback(on_nothing=print)
    assert isinstance(lambda_.value, TypeError)
    with pytest.raises(CallbackTypeError, match=r"takes an accmt_state\.TrainingState"):
        CallbackHandler().bind(state={})  # type: ignore[arg-type]


def test_bad_values_are_value_errors() -> None:
    with pytest.raises(ValueError, match="patience must be an int of 1 or more") as caught:
        EarlyStopping(patience=0)
    assert type(caught.value) is CallbackValueError
    with pytest.raises(CallbackValueError, match="every_n_steps"):
        PrintLogger(every_n_steps=0)
    callback = Callback()
    handler = CallbackHandler([callback])
    with pytest.raises(CallbackValueError, match="already added"):
        handler.add(callback)
    handler.bind(state=TrainingState())
    with pytest.raises(ValueError, match="Did you mean 'on_epoch_end'") as unknown:
        handler.call("on_epoch_ends")
    assert type(unknown.value) is CallbackValueError


def test_use_before_bind_is_a_runtime_error() -> None:
    with pytest.raises(RuntimeError, match="before bind") as caught:
        CallbackHandler().call("on_fit_start")
    assert type(caught.value) is CallbackNotBoundError
    with pytest.raises(CallbackNotBoundError, match="not in a CallbackHandler"):
        Callback().request_stop()
    with pytest.raises(CallbackNotBoundError, match="bind the handler"):
        EarlyStopping().on_evaluation_end()


def test_an_unresolved_monitor_is_a_value_error() -> None:
    stopper = EarlyStopping("f1")
    state = TrainingState(additional_metrics={"valid": {"loss": 1.0}})
    CallbackHandler([stopper]).bind(state=state)
    with pytest.raises(ValueError, match="no metric 'f1'") as caught:
        stopper.on_evaluation_end()
    assert type(caught.value) is MonitoredMetricError
    state.additional_metrics["valid"]["f1"] = "high"
    with pytest.raises(TypeError, match="not a number") as wrong_type:
        stopper.on_evaluation_end()
    assert type(wrong_type.value) is CallbackTypeError


def test_bad_callback_state_is_a_state_error_and_a_callback_error(tmp_path: Path) -> None:
    handler = CallbackHandler([EarlyStopping()])
    with pytest.raises(StateError, match="no state for the callback") as caught:
        handler.load_state_dict({})
    assert type(caught.value) is CallbackStateError
    with pytest.raises(CallbackStateError, match="'wait' must be an int"):
        handler.load_state_dict({"EarlyStopping[loss]": {"best": None, "wait": -1}})
    missing = tmp_path / "missing.json"
    with pytest.raises(CallbackError, match=r"missing\.json: cannot read") as unreadable:
        handler.load_state(missing)
    assert isinstance(unreadable.value, ValueError)
    assert unreadable.value.file == str(missing)  # type: ignore[attr-defined]
