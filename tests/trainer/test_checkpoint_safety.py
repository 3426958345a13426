"""Crafted checkpoints: a malicious pickle in every kind of file a checkpoint holds, with a
manifest forged to match. No code runs (the marker file never appears), the checkpoint is
refused with a warning naming the file, and the run resumes from the one before it."""

from __future__ import annotations

import builtins
import json
import pickle
from pathlib import Path
from typing import Any

import pytest
import torch
import xxhash

from accmt_callbacks import Callback
from accmt_trainer import HyperParameters, Trainer, TrainerConfigError

from .conftest import Classifier, blobs

HPS = HyperParameters(
    epochs=1, batch_size=8, optimizer="AdamW", scheduler="StepLR", scheduler_kwargs={"step_size": 1}
)


class Payload:
    """Unpickling it creates ``marker``: proof that code ran."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (builtins.open, (str(self.marker), "w"))


class Counter:
    """An object registered for checkpointing: a tensor and a number."""

    def __init__(self) -> None:
        self.total, self.calls = torch.zeros(2), 0

    def state_dict(self) -> dict[str, Any]:
        return {"total": self.total, "calls": self.calls}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.total, self.calls = state["total"], state["calls"]


class DieAtStep(Callback):
    def on_after_training_step(self) -> None:
        if self.state is not None and self.state.global_step == 3:
            raise RuntimeError("died")


def make(folder: Path, callbacks: list[Callback]) -> Trainer:
    trainer = Trainer(
        HPS,
        folder,
        checkpoint_every="1 step",
        callbacks=callbacks,
        log_with=None,
        progress_bar=False,
    )
    trainer.register_for_checkpointing(Counter())
    return trainer


def two_checkpoints(folder: Path) -> Path:
    with pytest.raises(RuntimeError, match="died"):
        make(folder, [DieAtStep()]).fit(Classifier(), blobs(32))
    newest = folder / "checkpoints" / "checkpoint_000002"
    assert newest.is_dir()
    return newest


def forge_manifest(checkpoint: Path) -> None:
    manifest = json.loads((checkpoint / "manifest.json").read_text())
    manifest["files"] = {
        str(path.relative_to(checkpoint)): {
            "size": path.stat().st_size,
            "xxh3_128": xxhash.xxh3_128(path.read_bytes()).hexdigest(),
        }
        for path in sorted(checkpoint.rglob("*"))
        if path.is_file() and path.name != "manifest.json"
    }
    (checkpoint / "manifest.json").write_text(json.dumps(manifest))


FILES = [
    "accelerate/model.safetensors",
    "accelerate/optimizer.bin",
    "accelerate/scheduler.bin",
    "accelerate/random_states_0.pkl",
    "process_0.safetensors",
    "object_0.safetensors",
    "callbacks.json",
    "state.json",
    "accelerate/custom_checkpoint_0.pkl",
    # What a checkpoint of mixed precision (fp16's scaler) or of a second process holds:
    "accelerate/scaler.pt",
    "accelerate/random_states_1.pkl",
    "process_1.safetensors",
]


@pytest.mark.parametrize("name", FILES)
@pytest.mark.parametrize("form", ["pickle", "torch archive"])
@pytest.mark.parametrize("force_unsafe_env", [False, True])
def test_a_malicious_file_runs_no_code_and_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, form: str, force_unsafe_env: bool
) -> None:
    if force_unsafe_env:
        monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    folder = tmp_path / "run"
    newest = two_checkpoints(folder)
    marker = tmp_path / "code-ran"
    target = newest / name
    if form == "pickle":
        target.write_bytes(pickle.dumps({"state": Payload(marker)}))
    else:
        torch.save({"state": Payload(marker)}, target)
    forge_manifest(newest)
    with pytest.warns(UserWarning, match=f"skipping checkpoint checkpoint_000002: {name}"):
        state = make(folder, []).fit(Classifier(), blobs(32))
    assert not marker.exists()
    assert state.finished  # resumed from checkpoint 1 and trained to the end


def test_an_object_that_is_not_plain_state_is_refused_at_registration(tmp_path: Path) -> None:
    class Opaque(Counter):
        def state_dict(self) -> dict[str, Any]:
            return {"generator": torch.Generator()}

    trainer = Trainer(HPS, tmp_path / "run", log_with=None)
    with pytest.raises(TrainerConfigError, match=r"Opaque.state_dict\(\)\['generator'\] is a "):
        trainer.register_for_checkpointing(Opaque())
    with pytest.raises(TrainerConfigError, match=r"has no state_dict\(\)"):
        trainer.register_for_checkpointing(object())


def test_registered_objects_come_back_on_resume(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    newest = two_checkpoints(folder)
    assert newest.exists()
    counter = Counter()
    seen: list[tuple[list[float], int]] = []

    class Look(Callback):
        def on_resume(self) -> None:
            seen.append((counter.total.tolist(), counter.calls))

    trainer = Trainer(
        HPS,
        folder,
        checkpoint_every="1 step",
        callbacks=[Look()],
        log_with=None,
        progress_bar=False,
    )
    trainer.register_for_checkpointing(counter)
    counter.total, counter.calls = torch.ones(2), 7  # to be overwritten by the checkpoint's
    trainer.fit(Classifier(), blobs(32))
    assert seen == [([0.0, 0.0], 0)]
