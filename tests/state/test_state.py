"""TrainingState in memory: defaults, validation on assignment, update, to_dict/from_dict."""

from __future__ import annotations

import math
from typing import Any

import attrs
import pytest

from accmt_state import SCHEMA_VERSION, StateError, TrainingState

DEFAULTS = {
    "batch_iteration": 0,
    "global_step": 0,
    "train_step": 0,
    "val_step": 0,
    "epoch": 0,
    "is_end_of_epoch": False,
    "is_last_training_batch": False,
    "is_last_validation_batch": False,
    "is_last_epoch": False,
    "evaluations_done": 0,
    "additional_metrics": {},
    "model_savings": {},
    "patience_left": {},
    "best_train_loss": math.inf,
    "best_valid_loss": math.inf,
    "finished": False,
    "num_checkpoints_made": 0,
    "batches_seen_in_epoch": 0,
    "last_evaluation_step": None,
    "skipped_steps": 0,
    "train_dataloader_idx": 0,
    "stop_reason": None,
    "stop_signal": None,
    "schema_version": 5,
}

REMOVED_IN_SCHEMA_3 = ["samples_seen_in_epoch", "sampler_seed"]

COUNTERS = [name for name, value in DEFAULTS.items() if type(value) is int]
FLAGS = [name for name, value in DEFAULTS.items() if type(value) is bool]

NONSENSE: list[tuple[str, Any, type[Exception]]] = [
    *[(name, -1, ValueError) for name in COUNTERS if name != "schema_version"],
    *[(name, True, TypeError) for name in COUNTERS if name != "schema_version"],
    *[(name, 1.0, TypeError) for name in COUNTERS if name != "schema_version"],
    *[(name, "3", TypeError) for name in COUNTERS if name != "schema_version"],
    *[(name, 1, TypeError) for name in FLAGS],
    *[(name, None, TypeError) for name in FLAGS],
    ("best_train_loss", "inf", TypeError),
    ("best_valid_loss", True, TypeError),
    ("best_valid_loss", None, TypeError),
    ("last_evaluation_step", -1, ValueError),
    ("last_evaluation_step", True, TypeError),
    ("last_evaluation_step", 1.5, TypeError),
    ("last_evaluation_step", 1.0, TypeError),
    ("last_evaluation_step", "3", TypeError),
    ("additional_metrics", {1: {}}, TypeError),
    ("additional_metrics", {"validation": {2: 0.5}}, TypeError),
    ("additional_metrics", {"validation": 0.5}, TypeError),
    ("additional_metrics", [], TypeError),
    ("model_savings", {1: 0.5}, TypeError),
    ("model_savings", {"accuracy": "high"}, TypeError),
    ("model_savings", {"accuracy": False}, TypeError),
    ("patience_left", {"accuracy": -1}, ValueError),
    ("patience_left", {"accuracy": 2.0}, TypeError),
    ("patience_left", {("a",): 2}, TypeError),
    ("stop_reason", 15, TypeError),
    ("stop_signal", False, TypeError),
]


def test_defaults_are_accmt_1x_ones_plus_resume_fields() -> None:
    assert attrs.asdict(TrainingState()) == DEFAULTS
    assert SCHEMA_VERSION == 5
    # so NONSENSE checks them like every other counter
    assert {"skipped_steps", "train_dataloader_idx"} <= set(COUNTERS)


@pytest.mark.parametrize("name", REMOVED_IN_SCHEMA_3)
def test_fields_removed_in_schema_3_are_gone(name: str) -> None:
    state = TrainingState()
    assert not hasattr(state, name)
    assert name not in attrs.fields_dict(TrainingState)
    assert name not in state.to_dict()
    with pytest.raises(TypeError, match=name):
        TrainingState(**{name: 0})
    with pytest.raises(TypeError, match="unknown or read-only fields"):
        state.update(**{name: 0})
    with pytest.raises(StateError, match=rf"unknown fields '{name}'"):
        TrainingState.from_dict({**state.to_dict(), name: 0})


def test_last_evaluation_step_is_none_or_a_count() -> None:
    state = TrainingState()
    for value in (0, 1024, None):
        state.last_evaluation_step = value
        assert state.last_evaluation_step == value
        assert TrainingState(last_evaluation_step=value).last_evaluation_step == value
        assert TrainingState.from_dict(state.to_dict()).last_evaluation_step == value
    assert TrainingState(last_evaluation_step=7).to_dict()["last_evaluation_step"] == 7


def test_mutable_dict_defaults_are_not_shared() -> None:
    first, second = TrainingState(), TrainingState()
    first.additional_metrics["validation"] = {"accuracy": 0.5}
    assert second.additional_metrics == {}


def test_loops_mutate_fields_directly() -> None:
    state = TrainingState()
    state.global_step += 1
    state.best_valid_loss = 3  # an int loss is stored as a float
    assert state.global_step == 1
    assert state.best_valid_loss == 3.0
    assert type(state.best_valid_loss) is float


@pytest.mark.parametrize(("name", "value", "error"), NONSENSE)
def test_nonsense_is_rejected_at_assignment_and_construction(
    name: str, value: Any, error: type[Exception]
) -> None:
    state = TrainingState()
    with pytest.raises(error, match=name):
        setattr(state, name, value)
    assert getattr(state, name) == DEFAULTS[name]
    with pytest.raises(error, match=name):
        TrainingState(**{name: value})


@pytest.mark.parametrize(("name", "value", "error"), NONSENSE)
def test_nonsense_is_rejected_at_load(name: str, value: Any, error: type[Exception]) -> None:
    data = {**TrainingState().to_dict(), name: value}
    with pytest.raises(StateError, match=rf"@ \$\.{name}\b"):
        TrainingState.from_dict(data)


def test_schema_version_is_fixed() -> None:
    state = TrainingState()
    with pytest.raises(attrs.exceptions.FrozenAttributeError):
        state.schema_version = 1
    with pytest.raises(ValueError, match="schema_version"):
        TrainingState(schema_version=1)
    with pytest.raises(ValueError, match="schema_version must be 5, got 3"):
        TrainingState(schema_version=3)


def test_update_sets_several_fields() -> None:
    state = TrainingState()
    state.update(global_step=10, epoch=2, finished=True, last_evaluation_step=7, skipped_steps=2)
    assert (state.global_step, state.epoch, state.finished) == (10, 2, True)
    assert (state.last_evaluation_step, state.skipped_steps) == (7, 2)
    state.update(last_evaluation_step=None)
    assert state.last_evaluation_step is None


def test_update_is_all_or_nothing() -> None:
    state = TrainingState()
    with pytest.raises(ValueError, match="epoch"):
        state.update(global_step=10, epoch=-1)
    assert state == TrainingState()
    with pytest.raises(ValueError, match="last_evaluation_step"):
        state.update(skipped_steps=1, last_evaluation_step=-1)
    assert state == TrainingState()


@pytest.mark.parametrize(
    "changes",
    [
        {"step": 1},
        {"global_step": 1, "nope": 2},
        {"schema_version": 2},
        {"schema_version": 3},
        {"global_step": 1, "sampler_seed": 7},
    ],
)
def test_update_rejects_unknown_names(changes: dict[str, Any]) -> None:
    state = TrainingState()
    with pytest.raises(TypeError, match="unknown or read-only fields"):
        state.update(**changes)
    assert state == TrainingState()


def test_update_is_keyword_only() -> None:
    with pytest.raises(TypeError):
        TrainingState().update({"global_step": 1})  # type: ignore[call-arg]


def test_to_dict_is_plain_strict_json_data() -> None:
    state = TrainingState(additional_metrics={"validation": {"loss": math.nan}})
    data = state.to_dict()
    assert data["best_train_loss"] == {"$numberDouble": "Infinity"}
    assert data["additional_metrics"] == {"validation": {"loss": {"$numberDouble": "NaN"}}}
    assert data["schema_version"] == 5
    assert (data["last_evaluation_step"], data["skipped_steps"]) == (None, 0)
    assert list(data) == list(DEFAULTS)


def test_from_dict_round_trips_and_does_not_alias_its_input() -> None:
    state = TrainingState(
        global_step=5,
        additional_metrics={"validation": {"values": [1, 2.5, -math.inf]}},
        model_savings={"accuracy": 0.5},
    )
    data = state.to_dict()
    loaded = TrainingState.from_dict(data)
    assert loaded == state
    loaded.additional_metrics["validation"]["values"].append(3)
    assert data["additional_metrics"]["validation"]["values"] == [
        1,
        2.5,
        {"$numberDouble": "-Infinity"},
    ]


def test_from_dict_accepts_plain_floats_too() -> None:
    data = {**TrainingState().to_dict(), "best_train_loss": math.inf, "best_valid_loss": 2}
    loaded = TrainingState.from_dict(data)
    assert loaded.best_train_loss == math.inf
    assert loaded.best_valid_loss == 2.0
    assert type(loaded.best_valid_loss) is float
