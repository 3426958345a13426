"""Edges of checkpoint writing: index past 999,999, a best-model write killed between its
renames, a pointer that cannot be written, a full disk, a resumed state that does not fit."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest
import torch
from accelerate import Accelerator

from accmt_callbacks import Callback, CallbackHandler
from accmt_metrics import Accuracy
from accmt_state import TrainingState
from accmt_trainer import CheckpointError, HyperParameters, Trainer
from accmt_trainer.checkpointing._checkpoints import CheckpointOptions, Checkpoints
from accmt_trainer.checkpointing._manifest import describe, verify
from accmt_trainer.checkpointing._run_facts import RunFacts

from .conftest import Classifier, blobs

HPS = HyperParameters(epochs=2, batch_size=8, optimizer_kwargs={"lr": 0.1})
RUN = RunFacts(
    world_size=1,
    train_batch_size=8,
    grad_accumulation_steps=1,
    batches_per_epoch=4,
    order_batches=4,
)


def make(folder: Path, **options: object) -> Trainer:
    return Trainer(HPS, folder, log_with=None, progress_bar=False, **options)  # type: ignore[arg-type]


def checkpoints(folder: Path) -> Checkpoints:
    accelerator = Accelerator(cpu=True)
    model = torch.nn.Linear(2, 2)
    accelerator.prepare(model, torch.optim.SGD(model.parameters(), lr=0.1))
    return Checkpoints(folder, accelerator, CheckpointOptions())


def save(store: Checkpoints, index: int, step: int) -> None:
    state = TrainingState(global_step=step, batch_iteration=step, batches_seen_in_epoch=step)
    handler = CallbackHandler()
    handler.bind(state=state)
    losses = {key: {"total": torch.zeros(()), "count": 0} for key in ("window", "epoch")}
    store.save(index, RUN, state, handler, losses)


def test_indices_past_999999_keep_their_order(tmp_path: Path) -> None:
    store = checkpoints(tmp_path / "checkpoints")
    save(store, 999_999, 1)
    save(store, 1_000_000, 2)
    names = [path.name for path in store.complete()]
    assert names == ["checkpoint_999999", "checkpoint_1000000"]
    start = store.start(RUN, torch.nn.Linear(2, 2))
    assert start.folder is not None
    assert start.folder.name == "checkpoint_1000000"
    assert start.state is not None
    assert start.state.global_step == 2


def test_a_pointer_that_cannot_be_written_is_named_and_the_checkpoint_kept(tmp_path: Path) -> None:
    root = tmp_path / "checkpoints"
    store = checkpoints(root)
    save(store, 1, 1)
    store.wait()
    (root / "latest.json").unlink()
    (root / "latest.json").mkdir()  # in the way of the atomic replace
    save(store, 2, 2)  # the pointer is written off the loop's path: its error comes next
    with pytest.raises(CheckpointError, match=r"latest\.json could not be written"):
        store.wait()
    assert [p.name for p in store.complete()] == ["checkpoint_000001", "checkpoint_000002"]
    assert verify(root / "checkpoint_000001").index == 1


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 3 MB tmpfs: room for a small checkpoint, not for a large one."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.fail(f"the test needs a tmpfs mount (root): {done.stderr}")
    yield mount
    subprocess.run(["umount", str(mount)], check=True)


class Grow(Callback):
    """Makes the model large after the first checkpoint, so the second cannot fit."""

    def on_save_checkpoint(self) -> None:
        assert self.state is not None
        if self.state.global_step == 2:
            model = self.trainer.accelerator.unwrap_model(self.trainer.model)
            model.register_buffer("ballast", torch.zeros(2_000_000))


def test_a_full_disk_is_named_and_the_previous_checkpoint_kept(small_disk: Path) -> None:
    folder = small_disk / "run"
    trainer = make(folder, checkpoint_every="1 step", callbacks=[Grow()], disable_model_saving=True)
    with pytest.raises(CheckpointError, match=r"could not write the checkpoint into .*No space"):
        trainer.fit(Classifier(), blobs(32))
    root = folder / "checkpoints"
    assert [
        p.name for p in Checkpoints(root, trainer.accelerator, CheckpointOptions()).complete()
    ] == ["checkpoint_000001"]
    assert not list(root.glob(".tmp-*"))  # the half-written one was removed
    # It resumes from the checkpoint that was kept.
    (folder / "checkpoints" / "checkpoint_000001").rename(small_disk / "kept")
    shutil.rmtree(folder)
    root.mkdir(parents=True)
    (small_disk / "kept").rename(root / "checkpoint_000001")
    state = make(folder, checkpoint_every=None).fit(Classifier(), blobs(32))
    assert state.finished


def test_a_best_model_write_killed_between_its_renames_is_recovered(tmp_path: Path) -> None:
    make(tmp_path, metrics=[Accuracy()]).fit(Classifier(), blobs(32), blobs(16, seed=1))
    best = tmp_path / "best_valid_loss"
    # Killed after moving the old version aside, before moving the new one in.
    best.rename(tmp_path / "best_valid_loss.old-1")
    shutil.copytree(tmp_path / "best_valid_loss.old-1", tmp_path / ".tmp-best_valid_loss")
    make(tmp_path, metrics=[Accuracy()]).fit(Classifier(), blobs(32), blobs(16, seed=1))
    assert (best / "model.safetensors").exists()
    assert not list(tmp_path.glob("best_valid_loss.old-*"))
    # The staging copy was incomplete: the set-aside version comes back.
    best.rename(tmp_path / "best_valid_loss.old-1")
    (tmp_path / ".tmp-best_valid_loss").mkdir()
    make(tmp_path, metrics=[Accuracy()]).fit(Classifier(), blobs(32), blobs(16, seed=1))
    assert json.loads((best / "metrics.json").read_text())["rule"] == "best_valid_loss"


def test_a_resumed_state_that_does_not_fit_the_run_is_named(tmp_path: Path) -> None:
    store = checkpoints(tmp_path / "checkpoints")
    save(store, 1, 1)
    folder = store.complete()[0]
    state = TrainingState.load(folder / "state.json")
    state.global_step = 40  # one epoch of 4 batches has only 1 step at batch 1
    state.save(folder / "state.json")
    manifest = json.loads((folder / "manifest.json").read_text())  # as if written so
    manifest["files"]["state.json"] = attrs.asdict(describe(folder / "state.json"))
    (folder / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(CheckpointError, match=r"state\.json: global_step is 40, .* must be 1"):
        store.start(RUN, torch.nn.Linear(2, 2))


def test_a_manifest_of_another_digest_is_refused_by_name(tmp_path: Path) -> None:
    store = checkpoints(tmp_path / "checkpoints")
    save(store, 1, 1)
    save(store, 2, 2)
    newest = store.complete()[1]
    manifest = json.loads((newest / "manifest.json").read_text())
    manifest["digest"] = "sha256"
    for name, entry in manifest["files"].items():
        del entry["xxh3_128"]
        entry["sha256"] = hashlib.sha256((newest / name).read_bytes()).hexdigest()
    (newest / "manifest.json").write_text(json.dumps(manifest))
    with pytest.warns(UserWarning, match=r"skipping checkpoint checkpoint_000002: .*xxh3_128"):
        start = store.start(RUN, torch.nn.Linear(2, 2))
    assert start.folder is not None
    assert start.folder.name == "checkpoint_000001"
