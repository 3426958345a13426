"""StateError: a ValueError naming the file and every bad field with its JSON path, and the base of
every error accmt-state raises, each also the built-in that fits."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import pytest

import accmt_state
from accmt_state import (
    SCHEMA_VERSION,
    StateError,
    StateMigrationError,
    StateTypeError,
    TrainingState,
    converter,
    register_migration,
    write_json,
)


def valid() -> dict[str, Any]:
    return TrainingState().to_dict()


def load_error(tmp_path: Path, data: Any, **options: Any) -> StateError:
    path = tmp_path / "state.json"
    write_json(path, data)
    with pytest.raises(StateError) as caught:
        TrainingState.load(path, **options)
    assert str(caught.value).startswith(f"{path}: not a valid TrainingState")
    assert caught.value.file == str(path)
    return caught.value


def test_state_error_is_a_value_error() -> None:
    assert issubclass(StateError, ValueError)


def test_every_bad_field_is_named_with_its_path(tmp_path: Path) -> None:
    data = valid()
    del data["epoch"], data["val_step"]
    data.update(
        global_step=-1,
        train_step="3",
        finished=1,
        last_evaluation_step=2.5,
        skipped_steps=-1,
        model_savings={"accuracy": "high"},
        patience_left={"loss": [2]},
        additional_metrics={"validation": [0.5]},
        unknown_field=True,
    )
    error = load_error(tmp_path, data)
    assert sorted(line.rsplit(" @ ", 1)[1] for line in error.problems) == [
        "$",
        "$.additional_metrics['validation']",
        "$.epoch",
        "$.finished",
        "$.global_step",
        "$.last_evaluation_step",
        "$.model_savings['accuracy']",
        "$.patience_left['loss']",
        "$.skipped_steps",
        "$.train_step",
        "$.val_step",
    ]
    message = str(error)
    assert "required field missing @ $.epoch" in message
    assert "global_step must be >= 0, got -1 @ $.global_step" in message
    assert "expected an integer, got a string ('3') @ $.train_step" in message
    assert "skipped_steps must be >= 0, got -1 @ $.skipped_steps" in message
    assert "@ $.last_evaluation_step" in message
    assert "unknown fields 'unknown_field'" in message


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ([], "expected an object, got an array ([]) @ $"),
        ("state", "expected an object, got a string ('state') @ $"),
        (None, "expected an object, got null (None) @ $"),
        (3, "expected an object, got an integer (3) @ $"),
        ({**valid(), "schema_version": "2"}, "@ $.schema_version"),
        ({**valid(), "schema_version": 0}, "@ $.schema_version"),
        ({**valid(), "schema_version": True}, "@ $.schema_version"),
        ({**valid(), "patience_left": {"loss": -2}}, "patience_left['loss'] must be >= 0"),
        ({**valid(), "best_train_loss": {"$numberDouble": "inf"}}, "@ $.best_train_loss"),
        ({**valid(), "best_train_loss": None}, "expected a number, got null"),
        ({**valid(), "last_evaluation_step": -5}, "last_evaluation_step must be >= 0, got -5"),
        ({**valid(), "last_evaluation_step": True}, "@ $.last_evaluation_step"),
        ({**valid(), "skipped_steps": None}, "@ $.skipped_steps"),
        (
            {k: v for k, v in valid().items() if k != "skipped_steps"},
            "required field missing @ $.skipped_steps",
        ),
        (
            {k: v for k, v in valid().items() if k != "last_evaluation_step"},
            "required field missing @ $.last_evaluation_step",
        ),
        ({**valid(), "sampler_seed": 1234}, "unknown fields 'sampler_seed'"),
    ],
)
def test_wrong_shapes(tmp_path: Path, data: Any, expected: str) -> None:
    assert expected in str(load_error(tmp_path, data))


def test_from_dict_errors_have_no_file() -> None:
    with pytest.raises(StateError) as caught:
        TrainingState.from_dict({**valid(), "epoch": -3})
    assert caught.value.file is None
    assert str(caught.value).startswith("not a valid TrainingState\n")


def test_state_error_pickles() -> None:
    error = StateError("not a valid TrainingState", ["required field missing @ $.epoch"], "s.json")
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.summary, copy.problems, copy.file, str(copy)) == (
        error.summary,
        error.problems,
        error.file,
        str(error),
    )


STATE_ERRORS = [
    value
    for name in accmt_state.__all__
    if isinstance(value := getattr(accmt_state, name), type) and issubclass(value, BaseException)
]


def test_every_public_error_is_a_state_error_and_a_builtin() -> None:
    assert sorted(error.__name__ for error in STATE_ERRORS) == [
        "StateError",
        "StateMigrationError",
        "StateTypeError",
    ]
    for error in STATE_ERRORS:
        assert issubclass(error, StateError)
        assert issubclass(error, ValueError)  # StateError always was one; users catch it so
    assert issubclass(StateTypeError, TypeError)


@pytest.mark.parametrize("error", STATE_ERRORS)
def test_every_error_pickles_as_itself(error: type[StateError]) -> None:
    copy = pickle.loads(pickle.dumps(error("summary", ["a problem"], "s.json")))
    assert type(copy) is error
    assert (copy.summary, copy.problems, copy.file) == ("summary", ("a problem",), "s.json")


def test_assigning_a_wrong_type_raises_a_state_type_error() -> None:
    state = TrainingState()
    with pytest.raises(StateTypeError, match="finished must be a bool, got int 1"):
        state.finished = 1  # type: ignore[assignment]
    with pytest.raises(TypeError, match="global_step must be an int") as wrong_type:
        state.global_step = "3"  # type: ignore[assignment]
    assert isinstance(wrong_type.value, StateError)
    with pytest.raises(TypeError, match="unknown or read-only fields: nope") as caught:
        state.update(nope=1)
    assert type(caught.value) is StateTypeError


def test_assigning_a_value_out_of_range_raises_a_state_error() -> None:
    state = TrainingState()
    with pytest.raises(ValueError, match="global_step must be >= 0, got -1") as caught:
        state.global_step = -1
    assert type(caught.value) is StateError
    with pytest.raises(StateError, match=r"patience_left\['loss'\] must be >= 0"):
        TrainingState(patience_left={"loss": -1})


def test_the_converter_raises_state_type_errors() -> None:
    with pytest.raises(StateTypeError, match=r"expected an integer, got a string \('3'\)"):
        converter.structure("3", int)


def test_misused_register_migration() -> None:
    with pytest.raises(ValueError, match="already registered") as caught:
        register_migration(1)(lambda data: data)
    assert type(caught.value) is StateMigrationError
    with pytest.raises(StateMigrationError, match="would never run"):
        register_migration(SCHEMA_VERSION)
    with pytest.raises(TypeError, match="from_version must be an int") as wrong_type:
        register_migration("1")  # type: ignore[arg-type]
    assert type(wrong_type.value) is StateTypeError
