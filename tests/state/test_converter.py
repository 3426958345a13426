"""The converter: strict JSON for non-finite floats, numpy and torch scalars, strict types."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pytest
from cattrs.errors import ClassValidationError

from accmt_state import TrainingState, converter, read_json, write_json


def strict_loads(text: str) -> Any:
    """A JSON parser that, like most outside Python, refuses bare Infinity and NaN."""

    def refuse(constant: str) -> None:
        raise ValueError(f"not strict JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (math.inf, {"$numberDouble": "Infinity"}),
        (-math.inf, {"$numberDouble": "-Infinity"}),
        (math.nan, {"$numberDouble": "NaN"}),
        (1.5, 1.5),
        (-0.0, -0.0),
    ],
)
def test_floats_unstructure_to_strict_json(value: float, encoded: Any) -> None:
    assert converter.unstructure(value) == encoded
    back = converter.structure(converter.unstructure(value), float)
    assert back == value or (math.isnan(back) and math.isnan(value))


def test_state_file_is_strict_json(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    TrainingState(
        additional_metrics={"validation": {"nan": math.nan, "list": [math.inf, -math.inf]}},
        model_savings={"loss": math.inf},
    ).save(path)
    text = path.read_text(encoding="ascii")
    assert "Infinity," not in text
    assert "NaN," not in text
    data = strict_loads(text)
    assert data["best_train_loss"] == {"$numberDouble": "Infinity"}
    assert data["additional_metrics"]["validation"]["list"][1] == {"$numberDouble": "-Infinity"}


def test_write_and_read_json_round_trip_plain_data(tmp_path: Path) -> None:
    path = tmp_path / "callback.json"
    data = {"best": math.inf, "history": [0.5, -math.inf, None, "text"], "nested": {"n": 3}}
    write_json(path, data)
    strict_loads(path.read_text())
    back = read_json(path)
    assert back == data


def test_numpy_scalars_become_plain_numbers(tmp_path: Path) -> None:
    metrics = {
        "f32": np.float32(0.5),
        "f64": np.float64(0.25),
        "i64": np.int64(7),
        "u8": np.uint8(3),
        "flag": np.bool_(True),
        "zero_d": np.array(2.5),
        "inf": np.float32("inf"),
    }
    state = TrainingState(additional_metrics={"validation": metrics})
    path = tmp_path / "state.json"
    state.save(path)
    loaded = TrainingState.load(path).additional_metrics["validation"]
    assert loaded == {
        "f32": 0.5,
        "f64": 0.25,
        "i64": 7,
        "u8": 3,
        "flag": True,
        "zero_d": 2.5,
        "inf": math.inf,
    }
    assert [type(value) for value in loaded.values()] == [
        float,
        float,
        int,
        int,
        bool,
        float,
        float,
    ]


def test_torch_scalars_become_plain_numbers(tmp_path: Path) -> None:
    # In a subprocess, so that this test process never imports torch.
    code = (
        "import sys, torch, accmt_state\n"
        "metrics = {'loss': torch.tensor(0.5), 'count': torch.tensor(3), "
        "'half': torch.tensor(0.25, dtype=torch.float16), 'flag': torch.tensor(True), "
        "'grad': torch.tensor(1.5, requires_grad=True) * 2}\n"
        "accmt_state.write_json(sys.argv[1], {'validation': metrics})\n"
    )
    path = tmp_path / "metrics.json"
    subprocess.run([sys.executable, "-c", code, str(path)], check=True, timeout=120)
    data = strict_loads(path.read_text())
    assert data == {
        "validation": {"loss": 0.5, "count": 3, "half": 0.25, "flag": True, "grad": 3.0}
    }
    assert type(data["validation"]["count"]) is int


def test_unserialisable_values_fail_at_write_and_leave_the_old_file(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    TrainingState(global_step=1).save(path)
    before = path.read_bytes()
    with pytest.raises(TypeError):
        TrainingState(additional_metrics={"validation": {"x": object()}}).save(path)
    with pytest.raises(ValueError, match="size 1"):
        write_json(path, {"array": np.zeros(3)})
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]


@attrs.define
class CallbackState:
    best: float
    wait: int
    history: list[float]


def test_other_packages_use_the_converter_for_their_own_classes(tmp_path: Path) -> None:
    path = tmp_path / "early_stopping.json"
    write_json(path, CallbackState(best=math.inf, wait=2, history=[0.5, math.nan]))
    back = converter.structure(read_json(path), CallbackState)
    assert back.best == math.inf
    assert back.wait == 2
    assert back.history[0] == 0.5
    assert math.isnan(back.history[1])


@pytest.mark.parametrize(
    ("data", "path"),
    [
        ({"best": 1.0, "wait": True, "history": []}, "$.wait"),
        ({"best": "1", "wait": 1, "history": []}, "$.best"),
        ({"best": 1.0, "wait": 1, "history": [1.0, "x"]}, "$.history[1]"),
        ({"best": 1.0, "wait": 1, "history": [], "extra": 0}, "$"),
    ],
)
def test_structuring_is_strict(data: dict[str, Any], path: str) -> None:
    import cattrs

    with pytest.raises(ClassValidationError) as caught:
        converter.structure(data, CallbackState)
    assert any(line.endswith(f"@ {path}") for line in cattrs.transform_error(caught.value))
