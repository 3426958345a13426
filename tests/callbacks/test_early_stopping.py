"""EarlyStopping driven by the hand-written loop: modes, monitors, patience across a resume."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from accmt_callbacks import CallbackHandler, EarlyStopping
from accmt_state import StateError, TrainingState

from ._loop import Metrics, Recorder, fit


def evaluations(*values: float, metric: str = "loss", valid_set: str = "valid") -> Any:
    """metrics(i) for the loop: the i-th value, in one validation set."""
    return lambda index: {valid_set: {metric: values[index], "other": 0.0}}


def run(stopper: EarlyStopping, values: list[float], **fit_options: Any) -> TrainingState:
    state = TrainingState()
    fit(
        CallbackHandler([stopper]),
        state,
        train=[1],
        valid={"valid": [1]},
        epochs=len(values),
        metrics=evaluations(*values),
        **fit_options,
    )
    return state


@pytest.mark.parametrize(
    ("mode", "values", "evaluations_done"),
    [
        ("min", [5.0, 4.0, 4.5, 4.2, 3.0, 3.1, 3.1], 7),  # improves at 3.0: never 3 bad in a row
        ("min", [5.0, 4.0, 4.5, 4.2, 4.1, 1.0, 1.0], 5),  # three without improvement: stop
        ("max", [0.1, 0.5, 0.4, 0.5, 0.3, 0.9, 0.9], 5),  # equal is not better
    ],
)
def test_stops_after_patience_evaluations_without_improvement(
    mode: Any, values: list[float], evaluations_done: int
) -> None:
    stopper = EarlyStopping("loss", mode=mode, patience=3)
    state = run(stopper, values)
    assert state.evaluations_done == evaluations_done
    assert stopper.handler is not None
    assert stopper.handler.should_stop is (evaluations_done < len(values))


def test_stop_reason_and_patience_left_mirror() -> None:
    stopper = EarlyStopping("loss", patience=2)
    recorder = Recorder()
    state = TrainingState()
    left: list[int] = []
    recorder.on_evaluation_end = lambda: left.append(state.patience_left["loss"])  # type: ignore[method-assign]
    handler = CallbackHandler([stopper, recorder])
    fit(handler, state, train=[1], valid={"v": [1]}, epochs=5, metrics=evaluations(3, 2, 2, 2, 2))
    assert left == [2, 2, 1, 0]
    assert state.patience_left == {"loss": 0}
    assert handler.stop_reason.startswith("EarlyStopping: loss has not improved for 2 evaluation")
    assert "best 2" in handler.stop_reason
    assert recorder.names()[-2:] == ["on_epoch_end", "on_fit_end"]


def test_patience_left_is_published_at_fit_start() -> None:
    stopper = EarlyStopping("acc@valid", mode="max", patience=4)
    handler = CallbackHandler([stopper])
    state = TrainingState()
    handler.bind(state=state)
    handler.call("on_fit_start")
    assert state.patience_left == {"acc@valid": 4}


def test_min_delta_requires_a_larger_improvement() -> None:
    stopper = EarlyStopping(patience=2, min_delta=0.5)
    state = run(stopper, [10.0, 9.6, 9.7, 8.0, 7.9])
    # 9.6 and 9.7 are within 0.5 of 10: two evaluations without improvement stop the run.
    assert state.evaluations_done == 3
    assert stopper.best == 10.0


def test_nan_is_never_an_improvement() -> None:
    stopper = EarlyStopping(patience=2)
    state = run(stopper, [math.nan, math.nan, 1.0])
    assert state.evaluations_done == 2
    assert stopper.best is None
    assert CallbackHandler([EarlyStopping()]).state_dict() == {
        "EarlyStopping[loss]": {"best": None, "wait": 0}
    }


def test_patience_survives_a_checkpoint_and_resume(tmp_path: Path) -> None:
    values = [5.0, 4.0, 4.5, 4.4, 4.3, 4.2, 4.1]
    first = EarlyStopping(patience=3)
    state = TrainingState()
    handler = CallbackHandler([first])
    fit(handler, state, train=[1], valid={"v": [1]}, epochs=4, metrics=evaluations(*values))
    assert (first.best, first.wait, handler.should_stop) == (4.0, 2, False)
    state.update(epoch=state.epoch + 1)  # the checkpoint after epoch 3: resume at epoch 4
    handler.save_state(tmp_path / "callbacks.json")
    state.save(tmp_path / "state.json")

    def resume(load: bool) -> tuple[TrainingState, CallbackHandler]:
        resumed_state = TrainingState.load(tmp_path / "state.json")
        resumed = CallbackHandler([EarlyStopping(patience=3)])
        if load:
            resumed.load_state(tmp_path / "callbacks.json")
        fit(
            resumed,
            resumed_state,
            train=[1],
            valid={"v": [1]},
            epochs=len(values),
            metrics=evaluations(*values),
            resume=True,
        )
        return resumed_state, resumed

    resumed_state, resumed = resume(load=True)
    assert resumed.should_stop
    assert resumed_state.evaluations_done == 5  # one more evaluation without improvement
    assert resumed_state.patience_left == {"loss": 0}
    # Without the callback state, patience starts over and the run goes on to the end.
    fresh_state, fresh = resume(load=False)
    assert not fresh.should_stop
    assert fresh_state.evaluations_done == len(values)


def test_load_state_dict_validates_and_mirrors() -> None:
    stopper = EarlyStopping(patience=5)
    handler = CallbackHandler([stopper])
    state = TrainingState()
    handler.bind(state=state)
    stopper.load_state_dict({"best": 1.5, "wait": 3})
    assert (stopper.best, stopper.wait, stopper.patience_left) == (1.5, 3, 2)
    assert state.patience_left == {"loss": 2}
    with pytest.raises(StateError, match="'wait' must be an int"):
        stopper.load_state_dict({"best": 1.0, "wait": -1})
    with pytest.raises(StateError, match="'best' must be a number or null"):
        stopper.load_state_dict({"best": "1.0", "wait": 0})


def monitored(monitor: str, metrics: Metrics) -> float:
    stopper = EarlyStopping(monitor)
    state = TrainingState()
    CallbackHandler([stopper]).bind(state=state)
    state.additional_metrics.update(metrics)
    return stopper.monitored_value()


def test_monitor_resolution() -> None:
    one = {"valid": {"loss": 1.0, "acc": 0.5}}
    several = {"valid": {"loss": 1.0}, "test": {"loss": 2.0}}
    assert monitored("acc", one) == 0.5
    assert monitored("acc@valid", one) == 0.5
    assert monitored("loss@test", several) == 2.0
    assert monitored("a@b@test", {"test": {"a@b": 3}}) == 3.0


@pytest.mark.parametrize(
    ("monitor", "metrics", "message"),
    [
        ("loss", {"valid": {"loss": 1}, "test": {"loss": 2}}, r"several validation sets \('valid'"),
        ("loss", {"valid": {"loss": 1}, "test": {"loss": 2}}, r"monitor='loss@valid'"),
        ("f1", {"valid": {"loss": 1, "acc": 2}}, r"no metric 'f1'; its metrics are 'loss', 'acc'"),
        ("loss@train", {"valid": {"loss": 1}}, r"no validation set 'train'; the sets are 'valid'"),
        ("loss", {}, r"state.additional_metrics is empty"),
    ],
)
def test_a_monitor_that_does_not_resolve_says_what_exists(
    monitor: str, metrics: Metrics, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        monitored(monitor, metrics)


def test_a_non_numeric_metric_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="not a number: 'high'"):
        monitored("loss", {"valid": {"loss": "high"}})


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"monitor": ""}, "monitor must name a metric"),
        ({"monitor": "loss@"}, "monitor must name a metric"),
        ({"monitor": "@valid"}, "monitor must name a metric"),
        ({"mode": "minimum"}, "mode must be 'min' or 'max'"),
        ({"patience": 0}, "patience must be an int of 1 or more"),
        ({"patience": 2.0}, "patience must be an int of 1 or more"),
        ({"patience": True}, "patience must be an int of 1 or more"),
        ({"min_delta": -0.1}, "min_delta must be a finite number of 0 or more"),
        ({"min_delta": math.inf}, "min_delta must be a finite number of 0 or more"),
        ({"min_delta": "0"}, "min_delta must be a finite number of 0 or more"),
    ],
)
def test_arguments_are_validated_at_construction(arguments: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        EarlyStopping(**arguments)


def test_defaults_and_state_key() -> None:
    stopper = EarlyStopping()
    assert (stopper.monitor, stopper.mode, stopper.patience, stopper.min_delta) == (
        "loss",
        "min",
        3,
        0.0,
    )
    assert stopper.state_key == "EarlyStopping[loss]"
    # One per monitored metric fits in one handler.
    CallbackHandler([EarlyStopping("loss"), EarlyStopping("acc", mode="max")])
    with pytest.raises(ValueError, match="share the state_key"):
        CallbackHandler([EarlyStopping("loss"), EarlyStopping("loss", mode="max")])


def test_firing_before_bind_says_what_to_do() -> None:
    with pytest.raises(RuntimeError, match="bind the handler"):
        EarlyStopping().on_evaluation_end()
