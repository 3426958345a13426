"""Property-based: valid states round-trip exactly through the file, and whatever bytes or JSON
the loader is fed, it returns a valid state or raises StateError, nothing else."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accmt_state import StateError, TrainingState, write_json

from ._strategies import json_values, states

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# Each example of these writes a file with fsync, which costs milliseconds on a real disk.
FILE_SETTINGS = settings(SETTINGS, max_examples=100)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("properties")


def exact_text(state: TrainingState) -> str:
    """The state's data as text: equal texts mean equal values and equal types (1 vs 1.0),
    NaN included, which == on the states cannot compare."""
    return json.dumps(state.to_dict())


def load_or_state_error(path: Path, lenient: bool) -> TrainingState | StateError:
    """What loading gives; any exception other than StateError fails the test."""
    result: TrainingState | StateError
    try:
        result = TrainingState.load(path, lenient=lenient)
    except StateError as error:
        result = error
    if isinstance(result, StateError):
        assert result.file == str(path)
        assert str(result).startswith(f"{path}: ")
    else:
        attrs.validate(result)
    return result


@FILE_SETTINGS
@given(state=states)
def test_any_valid_state_round_trips_exactly_through_the_file(
    folder: Path, state: TrainingState
) -> None:
    path = folder / "round_trip.json"
    state.save(path)
    loaded = TrainingState.load(path)
    assert exact_text(loaded) == exact_text(state)
    if "NaN" not in exact_text(state):
        assert loaded == state


@SETTINGS
@given(state=states)
def test_any_valid_state_round_trips_through_to_dict(state: TrainingState) -> None:
    assert exact_text(TrainingState.from_dict(state.to_dict())) == exact_text(state)


@SETTINGS
@given(content=st.binary(max_size=300), lenient=st.booleans())
def test_arbitrary_bytes_give_a_state_or_a_state_error(
    folder: Path, content: bytes, lenient: bool
) -> None:
    path = folder / "bytes.json"
    path.write_bytes(content)
    assert isinstance(load_or_state_error(path, lenient), StateError)


@FILE_SETTINGS
@given(state=states, data=st.data())
def test_truncated_files_give_the_state_or_a_state_error(
    folder: Path, state: TrainingState, data: st.DataObject
) -> None:
    path = folder / "truncated.json"
    state.save(path)
    content = path.read_bytes()
    path.write_bytes(content[: data.draw(st.integers(0, len(content)))])
    result = load_or_state_error(path, lenient=False)
    assert isinstance(result, StateError) or exact_text(result) == exact_text(state)


@st.composite
def perturbed_states(draw: st.DrawFn) -> Any:
    """A valid state's data with a few fields replaced, removed or added."""
    data = draw(states).to_dict()
    for _ in range(draw(st.integers(1, 3))):
        key = draw(st.sampled_from(sorted(data)) | st.text(max_size=8))
        if draw(st.booleans()):
            data[key] = draw(json_values)
        else:
            data.pop(key, None)
    return data


@pytest.mark.filterwarnings("ignore:.*loaded leniently")
@SETTINGS
@given(data=json_values | perturbed_states(), lenient=st.booleans(), bare=st.booleans())
def test_arbitrary_json_gives_a_state_or_a_state_error(
    folder: Path, data: Any, lenient: bool, bare: bool
) -> None:
    path = folder / "arbitrary.json"
    # Bare Infinity/NaN as accmt 1.x wrote them, or strict JSON with tagged non-finite floats.
    if bare:
        path.write_text(json.dumps(data))
    else:
        write_json(path, data)
    result = load_or_state_error(path, lenient)
    if isinstance(result, StateError):
        assert result.problems
        assert all(" @ $" in line for line in result.problems)
