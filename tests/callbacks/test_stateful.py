"""Stateful callbacks: collected by state_key, through JSON files, and back."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import attrs
import pytest

from accmt_callbacks import Callback, CallbackHandler, EarlyStopping
from accmt_state import StateError, TrainingState

from ._loop import fit


@attrs.define
class Window:
    size: int
    values: list[float]


class Counter(Callback):
    """Counts training steps; keeps a tuple and an attrs instance too."""

    def __init__(self) -> None:
        self.steps = 0
        self.window = Window(2, [])

    def on_after_training_step(self) -> None:
        self.steps += 1
        self.window.values.append(float(self.steps))

    def state_dict(self) -> dict[str, Any]:
        return {"steps": self.steps, "shape": (2, 3), "window": self.window}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.steps = state["steps"]
        self.window = Window(**state["window"])


class Tagged(Counter):
    def __init__(self, tag: str) -> None:
        super().__init__()
        self.tag = tag

    @property
    def state_key(self) -> str:
        return f"Tagged[{self.tag}]"


def test_state_round_trips_through_a_json_file(tmp_path: Path) -> None:
    counter = Counter()
    handler = CallbackHandler([counter, Callback(), Tagged("a"), Tagged("b")])
    fit(handler, TrainingState(), train=[1, 2, 3])
    path = tmp_path / "callbacks.json"
    handler.save_state(path)

    on_disk = json.loads(path.read_text())
    assert on_disk == {
        "Counter": {"steps": 3, "shape": [2, 3], "window": {"size": 2, "values": [1.0, 2.0, 3.0]}},
        "Tagged[a]": {
            "steps": 3,
            "shape": [2, 3],
            "window": {"size": 2, "values": [1.0, 2.0, 3.0]},
        },
        "Tagged[b]": {
            "steps": 3,
            "shape": [2, 3],
            "window": {"size": 2, "values": [1.0, 2.0, 3.0]},
        },
    }
    assert handler.state_dict() == on_disk

    restored, a, b = Counter(), Tagged("a"), Tagged("b")
    fresh = CallbackHandler([b, restored, a])  # order does not matter, keys do
    fresh.load_state(path)
    for callback in (restored, a, b):
        assert callback.steps == 3
        assert callback.window == Window(2, [1.0, 2.0, 3.0])


def test_state_dict_is_a_copy() -> None:
    counter = Counter()
    handler = CallbackHandler([counter])
    states = handler.state_dict()
    counter.window.values.append(9.0)
    assert states["Counter"]["window"]["values"] == []


def test_two_stateful_callbacks_with_one_key_are_refused() -> None:
    handler = CallbackHandler([Counter()])
    with pytest.raises(
        ValueError, match=r"share the state_key 'Counter'.*overriding the state_key"
    ):
        handler.add(Counter())
    assert len(handler.callbacks) == 1
    # Stateless callbacks of one class are fine.
    handler.add(Callback())
    handler.add(Callback())


def test_half_stateful_callbacks_are_refused() -> None:
    class SavesOnly(Callback):
        def state_dict(self) -> dict[str, Any]:
            return {"x": 1}

    class LoadsOnly(Callback):
        def load_state_dict(self, state: dict[str, Any]) -> None:
            pass

    with pytest.raises(TypeError, match="overrides state_dict\\(\\) but not load_state_dict"):
        CallbackHandler([SavesOnly()])
    with pytest.raises(TypeError, match="overrides load_state_dict\\(\\) but not state_dict"):
        CallbackHandler([LoadsOnly()])


def test_strict_loading_refuses_missing_and_unknown_keys_before_touching_anyone() -> None:
    counter = Counter()
    handler = CallbackHandler([counter, EarlyStopping()])
    states = {"Counter": {"steps": 7, "window": {"size": 2, "values": []}}, "Gone": {"x": 1}}
    with pytest.raises(StateError) as info:
        handler.load_state_dict(states)
    assert info.value.problems == (
        "no state for the callback 'EarlyStopping[loss]'",
        "state for 'Gone', which no callback has",
    )
    assert "strict=False" in str(info.value)
    assert counter.steps == 0

    handler.load_state_dict(states, strict=False)
    assert counter.steps == 7


def test_a_state_that_is_not_json_names_the_callback_and_the_place() -> None:
    class Holds(Callback):
        def __init__(self, value: Any) -> None:
            self.value = value

        def state_dict(self) -> dict[str, Any]:
            return {"nested": {"list": [1, self.value]}}

        def load_state_dict(self, state: dict[str, Any]) -> None:
            pass

    with pytest.raises(TypeError, match=r"Holds\.nested\.list\[1\] has type object"):
        CallbackHandler([Holds(object())]).state_dict()
    with pytest.raises(TypeError, match=r"Holds\.nested\.list\[1\] has type set"):
        CallbackHandler([Holds({1, 2})]).state_dict()
    with pytest.raises(TypeError, match="key 1 of type int"):
        CallbackHandler([Holds({1: "x"})]).state_dict()


def test_state_dict_must_return_a_dict() -> None:
    class ReturnsList(Callback):
        def state_dict(self) -> dict[str, Any]:
            return [1, 2]  # type: ignore[return-value]

        def load_state_dict(self, state: dict[str, Any]) -> None:
            pass

    with pytest.raises(TypeError, match="must return a dict, got list"):
        CallbackHandler([ReturnsList()]).state_dict()


def test_errors_in_state_methods_name_the_callback() -> None:
    class Fails(Counter):
        def load_state_dict(self, state: dict[str, Any]) -> None:
            raise KeyError("steps")

    with pytest.raises(KeyError) as info:
        CallbackHandler([Fails()]).load_state_dict({Fails.__qualname__: {}})
    assert info.value.__notes__ == [f"raised by {Fails.__qualname__}.load_state_dict()"]


def test_loading_a_file_that_is_not_a_json_object_names_it(tmp_path: Path) -> None:
    handler = CallbackHandler([Counter()])
    listing = tmp_path / "list.json"
    listing.write_text("[1, 2]")
    with pytest.raises(StateError, match=r"list\.json"):
        handler.load_state(listing)
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(StateError, match=r"broken\.json"):
        handler.load_state(broken)
    with pytest.raises(StateError, match=r"missing\.json"):
        handler.load_state(tmp_path / "missing.json")
    mismatched = tmp_path / "mismatched.json"
    mismatched.write_text('{"Other": {}}')
    with pytest.raises(StateError, match=r"mismatched\.json: callback state does not match"):
        handler.load_state(mismatched)


def test_an_entry_that_is_not_a_dict_is_refused_even_when_lenient() -> None:
    counter = Counter()
    handler = CallbackHandler([counter])
    for strict in (True, False):
        with pytest.raises(StateError) as info:
            handler.load_state_dict({"Counter": 5}, strict=strict)
        assert info.value.problems == (
            "the state of 'Counter' must be a dict (a JSON object), got int",
        )
    with pytest.raises(StateError, match="must be a mapping"):
        handler.load_state_dict([("Counter", {})])  # type: ignore[arg-type]


def test_non_finite_floats_round_trip_in_memory_and_through_a_file(tmp_path: Path) -> None:
    class Best(Callback):
        def __init__(self) -> None:
            self.best = math.inf
            self.history = [math.nan, -math.inf]

        def state_dict(self) -> dict[str, Any]:
            return {"best": self.best, "history": self.history}

        def load_state_dict(self, state: dict[str, Any]) -> None:
            self.best = state["best"]
            self.history = state["history"]

    saved = CallbackHandler([Best()])
    saved.save_state(tmp_path / "best.json")
    # Strict JSON (no bare Infinity or NaN) in the file and in memory.
    json.loads((tmp_path / "best.json").read_text(), parse_constant=pytest.fail)
    json.dumps(saved.state_dict(), allow_nan=False)
    for load in (
        lambda handler: handler.load_state_dict(saved.state_dict()),
        lambda handler: handler.load_state(tmp_path / "best.json"),
    ):
        restored = Best()
        restored.best, restored.history = 0.0, []
        load(CallbackHandler([restored]))
        assert restored.best == math.inf
        assert math.isnan(restored.history[0])
        assert restored.history[1] == -math.inf
