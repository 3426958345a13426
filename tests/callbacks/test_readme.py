"""The package README's custom loop is under 40 lines and runs as shown."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

README = Path(__file__).parents[2] / "packages" / "callbacks" / "README.md"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)


def test_the_custom_loop_runs_and_stops_early(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "SLURM_PROCID"):
        monkeypatch.delenv(name, raising=False)
    loop = python_blocks()[0]
    assert "handler.bind" in loop
    assert "import torch" not in loop
    assert len(loop.splitlines()) < 40
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {}
    exec(compile(loop, str(README), "exec"), namespace)

    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("epoch 0 step 10 | valid: loss=")
    assert lines[-1].startswith("EarlyStopping: loss has not improved for 2 evaluation(s)")
    state = namespace["state"]
    assert 3 <= state.epoch < 49  # type: ignore[attr-defined]
    saved = json.loads((tmp_path / "callbacks.json").read_text())
    assert saved["EarlyStopping[loss]"]["wait"] == 2
