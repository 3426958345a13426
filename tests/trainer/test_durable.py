"""Durability: a new checkpoint, and a new best model, is on the disk before the version it
replaces is removed. Every fsync, rename and removal of a run is recorded, in order, and the
order is checked: the new folder's files and folders synced (a best model's before its rename,
a checkpoint's after it, in the background writer), the parent folder and the pointer synced
after the rename, and only then the old one removed. And a run SIGKILLed in that
window, with both on the disk, resumes from the new one to the uninterrupted run's weights."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from accelerate.state import AcceleratorState

from accmt_callbacks import Callback
from accmt_trainer import Trainer
from accmt_trainer.checkpointing._folders import recover_folder, replace_folder
from accmt_trainer.checkpointing._manifest import verify

from .test_checkpoints import fit, hps, make

WORKER = Path(__file__).parent / "workers" / "killed_commit.py"
sys.path.insert(0, str(WORKER.parent))
from killed_commit import run  # noqa: E402
from slow_run import Linear, data  # noqa: E402

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="names a synced descriptor through /proc"
)

Event = tuple[str, Path, frozenset[Path]]


class Recorder:
    """The run's fsyncs (by the path of the descriptor), renames of folders (with what each
    held) and removals, in order."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.events: list[Event] = []
        fsync, rename, rmtree = os.fsync, os.rename, shutil.rmtree

        def synced(descriptor: int) -> None:
            path = Path(os.readlink(f"/proc/self/fd/{descriptor}"))
            self.events.append(("sync", path, frozenset()))
            fsync(descriptor)

        def renamed(source: Any, target: Any, *args: Any, **kwargs: Any) -> None:
            source = Path(source)
            held = frozenset(source.rglob("*")) | {source} if source.is_dir() else frozenset()
            self.events.append(("rename", Path(target), frozenset(held)))
            rename(source, target, *args, **kwargs)

        def removed(path: Any, *args: Any, **kwargs: Any) -> None:
            if Path(path).exists():
                self.events.append(("remove", Path(path), frozenset()))
            rmtree(path, *args, **kwargs)

        monkeypatch.setattr(os, "fsync", synced)
        monkeypatch.setattr(os, "rename", renamed)
        monkeypatch.setattr(shutil, "rmtree", removed)

    def index(self, kind: str, where: Path | str, start: int = 0) -> int:
        """The first event of ``kind`` from ``start`` on whose path is ``where``, or whose name
        starts with it."""
        for number in range(start, len(self.events)):
            found, path, _ = self.events[number]
            named = path.name.startswith(where) if isinstance(where, str) else path == where
            if found == kind and named:
                return number
        seen = [(found, path.name) for found, path, _ in self.events[start:]]
        raise AssertionError(f"no {kind} of {where} after event #{start}: {seen}")

    def synced_before(self, number: int) -> set[Path]:
        return {path for kind, path, _ in self.events[:number] if kind == "sync"}

    def check_replaced(
        self, folder: Path, removal: int, *, synced_after_rename: bool = False
    ) -> None:
        """``folder`` was renamed into place whole, every file and folder it holds was synced
        (a best model's before its rename; a checkpoint's after it, off the training loop's
        path), and its parent after the rename, all before event ``removal``."""
        renaming = max(
            number
            for number, (kind, path, _) in enumerate(self.events[:removal])
            if kind == "rename" and path == folder
        )
        held = self.events[renaming][2]
        assert held, f"{folder} was renamed into place empty"
        if synced_after_rename:
            source = min(held, key=lambda path: len(path.parts))
            wanted = {folder / path.relative_to(source) for path in held}
            unsynced = wanted - self.synced_before(removal)
        else:
            unsynced = held - self.synced_before(renaming)
        assert not unsynced, f"{folder.name}: not synced in time: {sorted(unsynced)}"
        parent = self.index("sync", folder.parent, renaming)
        assert parent < removal, f"{folder.parent} synced only after the removal"


@pytest.mark.parametrize("background", [False, True], ids=["sync", "async"])
def test_a_checkpoint_is_durable_before_the_one_it_replaces_is_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, background: bool
) -> None:
    tmp_path = tmp_path.resolve()  # as /proc names the synced files
    recorder = Recorder(monkeypatch)
    options = {"checkpoint_every": "1 step", "max_checkpoints": 2, "checkpoint_async": background}
    fit(make(tmp_path, hps=hps(epochs=1), **options))
    root = tmp_path / "checkpoints"
    # Four steps and the run's end: five checkpoints, from the third on each removed the oldest.
    assert sorted(p.name for p in root.glob("checkpoint_*")) == [
        "checkpoint_000004",
        "checkpoint_000005",
    ]
    for new, old in ((3, 1), (4, 2), (5, 3)):
        removal = recorder.index("remove", root / f"checkpoint_{old:06d}")
        recorder.check_replaced(root / f"checkpoint_{new:06d}", removal, synced_after_rename=True)
        # The pointer: its file synced, then (after its atomic replace) the folder again.
        renaming = recorder.index("rename", root / f"checkpoint_{new:06d}")
        pointer = recorder.index("sync", ".latest.json.", renaming)
        after = recorder.index("sync", root, pointer)
        assert after < removal


def test_a_best_model_folder_is_durable_before_the_old_one_is_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tmp_path = tmp_path.resolve()
    folder, staging = tmp_path / "best", tmp_path / ".tmp-best"
    for version, place in enumerate((folder, staging)):
        (place / "shards").mkdir(parents=True)
        (place / "model.safetensors").write_bytes(b"x" * (version + 1))
        (place / "shards" / "part.bin").write_bytes(b"y")
    recorder = Recorder(monkeypatch)
    replace_folder(staging, folder)
    assert (folder / "model.safetensors").read_bytes() == b"xx"
    removal = recorder.index("remove", "best.old-1")
    # The new version was synced whole before even the old one was moved aside.
    aside = recorder.index("rename", "best.old-1")
    held = recorder.events[recorder.index("rename", folder)][2]
    assert held <= recorder.synced_before(aside)
    recorder.check_replaced(folder, removal)


def test_a_recovered_best_model_folder_is_durable_before_the_copies_go(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tmp_path = tmp_path.resolve()
    folder, staging = tmp_path / "best", tmp_path / ".tmp-best"
    staging.mkdir()
    (staging / "metrics.json").write_text("{}")
    (tmp_path / "best.old-1").mkdir()  # a kill came between replace_folder's renames
    recorder = Recorder(monkeypatch)
    recover_folder(folder, staging, complete="metrics.json")
    removal = recorder.index("remove", "best.old-1")
    rename = recorder.index("rename", folder)
    assert rename < recorder.index("sync", tmp_path, rename) < removal


class Resumed(Callback):
    step = -1

    def on_resume(self) -> None:
        assert self.state is not None
        self.step = self.state.global_step


def final_weights(trainer: Trainer) -> dict[str, Any]:
    AcceleratorState._reset_state(reset_partial_state=True)  # as in a new process
    trainer.fit(Linear(), data())
    return trainer.accelerator.unwrap_model(trainer.model).state_dict()  # type: ignore[no-any-return]


@pytest.mark.parametrize("background", [False, True], ids=["sync", "async"])
def test_a_run_killed_between_a_checkpoint_s_sync_and_the_old_one_s_removal_resumes_exactly(
    tmp_path: Path, background: bool
) -> None:
    folder, root = tmp_path / "run", tmp_path / "run" / "checkpoints"
    command = [sys.executable, str(WORKER), str(folder), "5", *(["--async"] * background)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    died = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert died.returncode == -signal.SIGKILL, died.stderr[-3000:]
    # Killed in the window: the fifth checkpoint in place and pointed to, the fourth (which it
    # replaces, max_checkpoints=1) not yet removed.
    assert [p.name for p in sorted(root.glob("checkpoint_*"))] == [
        "checkpoint_000004",
        "checkpoint_000005",
    ]
    assert json.loads((root / "latest.json").read_text()) == {"latest": "checkpoint_000005"}
    assert verify(root / "checkpoint_000005").index == 5
    resumed = Resumed()
    got = final_weights(run(folder, background, callbacks=[resumed]))
    assert resumed.step == 5  # from the new checkpoint, verified
    expected = final_weights(run(tmp_path / "uninterrupted", background))
    assert got.keys() == expected.keys()
    assert all(torch.equal(got[name], expected[name]) for name in expected)
