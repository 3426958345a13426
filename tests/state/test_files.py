"""write_json and read_json: atomic, durable writes; reads that fail with the file's name."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest

from accmt_state import StateError, TrainingState, read_json, write_json


class Recorder:
    """Records the order of fsyncs (of files and of folders) and renames."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.events: list[tuple[str, str]] = []
        real_fsync, real_replace = os.fsync, os.replace

        def fsync(fd: int) -> None:
            kind = "folder" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file"
            self.events.append(("fsync", kind))
            real_fsync(fd)

        def replace(source: Any, target: Any) -> None:
            self.events.append(("replace", Path(target).name))
            real_replace(source, target)

        monkeypatch.setattr(os, "fsync", fsync)
        monkeypatch.setattr(os, "replace", replace)


def test_write_fsyncs_the_file_then_renames_then_fsyncs_the_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorder = Recorder(monkeypatch)
    TrainingState(global_step=3).save(tmp_path / "state.json")
    assert recorder.events == [("fsync", "file"), ("replace", "state.json"), ("fsync", "folder")]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]
    assert TrainingState.load(tmp_path / "state.json").global_step == 3


def test_a_failed_write_keeps_the_old_file_and_cleans_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "state.json"
    TrainingState(global_step=1).save(path)
    before = path.read_bytes()

    def broken_fsync(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", broken_fsync)
    with pytest.raises(OSError, match="No space"):
        TrainingState(global_step=2).save(path)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]


def test_the_written_file_follows_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        write_json(tmp_path / "a.json", {"x": 1})
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "a.json").stat().st_mode) == 0o644


def test_write_replaces_an_existing_file(tmp_path: Path) -> None:
    path = tmp_path / "data.json"
    write_json(path, {"version": 1})
    write_json(str(path), {"version": 2})
    assert read_json(str(path)) == {"version": 2}


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"", "empty"),
        (b" \n\t", "empty"),
        (b'{"global_step": 1, "epo', "not valid JSON"),
        (b"{'single': 'quotes'}", "not valid JSON"),
        (b"\xff\xfe{\x00}\x00", "not valid JSON"),
        (b"<html></html>", "not valid JSON"),
        (b"[" * 100_000, "not valid JSON"),
        (b'{"a": 1} trailing', "not valid JSON"),
    ],
)
def test_read_json_names_the_file(tmp_path: Path, content: bytes, reason: str) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(StateError, match=reason) as caught:
        read_json(path)
    assert caught.value.file == str(path)
    assert str(caught.value).startswith(f"{path}: ")


def test_read_json_of_a_missing_file_or_a_folder(tmp_path: Path) -> None:
    with pytest.raises(StateError, match="cannot read") as caught:
        read_json(tmp_path / "missing.json")
    assert isinstance(caught.value.__cause__, FileNotFoundError)
    with pytest.raises(StateError, match="cannot read"):
        read_json(tmp_path)


def test_read_json_accepts_bare_nonfinite_numbers_as_accmt_1x_wrote_them(tmp_path: Path) -> None:
    path = tmp_path / "old.json"
    path.write_text('{"a": Infinity, "b": -Infinity, "c": [NaN]}')
    data = read_json(path)
    assert data["a"] == float("inf")
    assert data["b"] == float("-inf")
    assert data["c"][0] != data["c"][0]
