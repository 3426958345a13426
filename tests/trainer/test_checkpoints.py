"""Checkpoints: when they are taken, what they hold, which one a resume trusts, and when a
resume refuses. The helpers here serve test_model_saving.py and test_signals.py too."""

from __future__ import annotations

import contextlib
import copy
import importlib.metadata
import json
import logging
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch
import xxhash
from accelerate.state import AcceleratorState
from safetensors.torch import load_file
from torch.utils.data import TensorDataset

from accmt_callbacks import Callback, EarlyStopping
from accmt_metrics import Accuracy
from accmt_state import TrainingState
from accmt_trainer import (
    AcceleratorModule,
    CheckpointError,
    HyperParameters,
    Trainer,
    TrainerConfigError,
)

from .conftest import Classifier, blobs
from .test_fit import hps as fit_hps

# 64 samples in batches of 16: 4 optimizer steps an epoch.
TRAIN = 64


def hps(**changes: Any) -> HyperParameters:
    """test_fit's hyperparameters (AdamW), for three epochs of 16-sample batches."""
    return fit_hps(**{"epochs": 3, "batch_size": 16, **changes})


def make(path: Path, **options: Any) -> Trainer:
    """A quiet CPU Trainer writing under ``path``."""
    quiet = {"log_with": None, "progress_bar": False, "cpu": True, "metrics": [Accuracy()]}
    for name, value in quiet.items():
        options.setdefault(name, value)
    return Trainer(options.pop("hps", hps()), path, **options)


def fit(
    trainer: Trainer,
    module: AcceleratorModule | None = None,
    train: TensorDataset | None = None,
    val: Any = None,
) -> TrainingState:
    """``trainer.fit`` on fresh Accelerate singletons, as a new process would have them."""
    AcceleratorState._reset_state(reset_partial_state=True)
    train = blobs(TRAIN) if train is None else train
    return trainer.fit(module or Classifier(), train, val)


class Crashed(Exception):
    """Stands for a process killed after optimizer step ``step``."""


class CrashAt(Callback):
    def __init__(self, step: int) -> None:
        self.step = step

    def on_after_training_step(self) -> None:
        if self.state is not None and self.state.global_step == self.step:
            raise Crashed(f"crashed after step {self.step}")


def crash(path: Path, step: int, *, val: Any = None, **options: Any) -> None:
    """Run until optimizer step ``step`` and die there, leaving the checkpoints taken so far."""
    callbacks = [CrashAt(step), *options.pop("callbacks", ())]
    module, train = options.pop("module", None), options.pop("train", None)
    with pytest.raises(Crashed):
        fit(make(path, callbacks=callbacks, **options), module, train, val)


def folders(path: Path) -> list[Path]:
    """The complete checkpoint folders under run folder ``path``, oldest first."""
    return sorted((path / "checkpoints").glob("checkpoint_*"))


def saved(folder: Path) -> TrainingState:
    return TrainingState.load(folder / "state.json")


def weights(module: AcceleratorModule) -> dict[str, torch.Tensor]:
    return {name: value.detach().clone() for name, value in module.model.state_dict().items()}


def same_weights(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[name], b[name]) for name in a)


class OnResume(Callback):
    """Records what ``on_resume`` sees, and the order of the first hooks."""

    def __init__(self) -> None:
        self.order: list[str] = []
        self.seen: list[dict[str, Any]] = []

    def on_fit_start(self) -> None:
        self.order.append("on_fit_start")

    def on_epoch_start(self) -> None:
        self.order.append("on_epoch_start")

    def on_resume(self) -> None:
        assert self.state is not None
        self.order.append("on_resume")
        self.seen.append(
            {
                "module": self.module,
                "trainer": self.trainer,
                "state": self.state,
                "at": (self.state.epoch, self.state.global_step),
                "restored": copy.deepcopy(self.state),
                "weights": weights(self.module),
            }
        )

    @property
    def resumed_at(self) -> tuple[int, int]:
        assert len(self.seen) == 1, self.seen
        at: tuple[int, int] = self.seen[0]["at"]
        return at


# ------------------------------------------------------------------------- the schedule


@pytest.mark.parametrize(
    ("text", "every", "unit"),
    [
        ("epoch", 1, "epoch"),
        ("2ep", 2, "epoch"),
        (" 3 Epochs ", 3, "epoch"),
        ("500 steps", 500, "step"),
        ("1 step", 1, "step"),
        ("eval", 1, "eval"),
        ("2 evals", 2, "eval"),
    ],
)
def test_checkpoint_every_reads_its_forms(tmp_path: Path, text: str, every: int, unit: str) -> None:
    schedule = make(tmp_path, checkpoint_every=text).checkpoint_options.schedule
    assert schedule is not None
    assert (schedule.every, schedule.unit) == (every, unit)


def test_checkpoint_every_none_takes_no_checkpoint(tmp_path: Path) -> None:
    trainer = make(tmp_path, checkpoint_every=None)
    assert trainer.checkpoint_options.schedule is None
    assert fit(trainer).finished
    assert not (tmp_path / "checkpoints").exists()


@pytest.mark.parametrize("bad", ["0 steps", "2 weeks", "steps 3", "", "1.5 epochs", "-1 ep", 3])
def test_checkpoint_every_names_a_bad_value(tmp_path: Path, bad: Any) -> None:
    with pytest.raises(TrainerConfigError, match=r"checkpoint_every=.*got " + repr(bad)):
        make(tmp_path, checkpoint_every=bad)


@pytest.mark.parametrize(
    ("options", "taken"),
    [
        # (epoch, global_step, evaluations_done) in each checkpoint, oldest first.
        ({"checkpoint_every": "epoch"}, [(1, 4, 1), (2, 8, 2), (3, 12, 3)]),
        ({"checkpoint_every": "2ep", "hps": hps(epochs=5)}, [(2, 8, 2), (4, 16, 4), (5, 20, 5)]),
        ({"checkpoint_every": "3 steps", "hps": hps(epochs=2)}, [(0, 3, 0), (1, 6, 1), (2, 8, 2)]),
        # Evaluations at steps 3 and 6, and at both epochs' ends (steps 4 and 8).
        (
            {"checkpoint_every": "eval", "evaluate_every_n_steps": 3, "hps": hps(epochs=2)},
            [(0, 3, 1), (1, 4, 2), (1, 6, 3), (2, 8, 4)],
        ),
        # Step 4 is an epoch's last: its end evaluates once, not twice. Evaluations at 2, 4, 6, 8.
        (
            {"checkpoint_every": "2 evals", "evaluate_every_n_steps": 2, "hps": hps(epochs=2)},
            [(1, 4, 2), (2, 8, 4)],
        ),
    ],
)
def test_checkpoints_are_taken_on_schedule(
    tmp_path: Path, options: dict[str, Any], taken: list[tuple[int, int, int]]
) -> None:
    fit(make(tmp_path, **options), val=blobs(16, seed=1))
    found = folders(tmp_path)
    assert [folder.name for folder in found] == [
        f"checkpoint_{index:06d}" for index in range(1, len(taken) + 1)
    ]
    assert [(s.epoch, s.global_step, s.evaluations_done) for s in map(saved, found)] == taken
    assert saved(found[-1]).finished
    assert not any(saved(folder).finished for folder in found[:-1])


def test_max_checkpoints_keeps_only_the_newest(tmp_path: Path) -> None:
    # A checkpoint after each of the 8 steps, and the final one: 9 in all, 3 kept.
    fit(make(tmp_path, hps=hps(epochs=2), checkpoint_every="1 step", max_checkpoints=3))
    root = tmp_path / "checkpoints"
    assert sorted(path.name for path in root.iterdir()) == [
        "checkpoint_000007",
        "checkpoint_000008",
        "checkpoint_000009",
        "latest.json",
    ]
    assert json.loads((root / "latest.json").read_text()) == {"latest": "checkpoint_000009"}
    assert [saved(folder).global_step for folder in folders(tmp_path)] == [7, 8, 8]
    assert saved(folders(tmp_path)[-1]).finished


@pytest.mark.parametrize("max_checkpoints", [0, -1, 1.5, True])
def test_max_checkpoints_must_be_a_positive_int(tmp_path: Path, max_checkpoints: Any) -> None:
    with pytest.raises(TrainerConfigError, match=r"max_checkpoints=.*got " + repr(max_checkpoints)):
        make(tmp_path, max_checkpoints=max_checkpoints)


def test_manifest_lists_versions_world_size_and_every_file(tmp_path: Path) -> None:
    fit(make(tmp_path, hps=hps(epochs=1), grad_accumulation_steps=2))
    (folder,) = folders(tmp_path)
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["world_size"] == 1
    assert manifest["index"] == 1
    assert (manifest["train_batch_size"], manifest["grad_accumulation_steps"]) == (16, 2)
    assert manifest["batches_per_epoch"] == 4
    for name in ("accmt-trainer", "accmt-state", "accmt-callbacks", "torch", "accelerate"):
        assert manifest["versions"][name] == importlib.metadata.version(name)
    on_disk = {
        str(path.relative_to(folder)): path
        for path in folder.rglob("*")
        if path.is_file() and path.name != "manifest.json"
    }
    assert {"state.json", "callbacks.json", "process_0.safetensors"} <= set(on_disk)
    assert any(name.startswith("accelerate/") for name in on_disk)
    assert set(manifest["files"]) == set(on_disk)
    assert manifest["digest"] == "xxh3_128"
    for name, path in on_disk.items():
        data = path.read_bytes()
        assert manifest["files"][name] == {
            "size": len(data),
            "xxh3_128": xxhash.xxh3_128(data).hexdigest(),
        }, name


# --------------------------------------------------------------- which checkpoint resumes

# Three epochs of 4 steps; dying after step 10 leaves the checkpoints of epochs 1 and 2.
CRASH = 10


@pytest.mark.parametrize("damaged", ["state.json", "process_0.safetensors", "accelerate"])
def test_a_corrupt_newest_checkpoint_falls_back_to_the_one_before(
    tmp_path: Path, damaged: str
) -> None:
    crash(tmp_path, CRASH)
    newest = folders(tmp_path)[-1]
    path = newest / damaged
    if path.is_dir():  # the largest of Accelerate's files: the weights or the optimizer
        path = max((p for p in path.rglob("*") if p.is_file()), key=lambda p: p.stat().st_size)
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    probe = OnResume()
    with pytest.warns(UserWarning, match=r"skipping checkpoint checkpoint_000002: .*falling back"):
        state = fit(make(tmp_path, callbacks=[probe]))
    assert probe.resumed_at == (1, 4)
    assert state.finished
    assert state.global_step == 12


def test_folders_without_a_manifest_or_still_temporary_are_never_loaded(tmp_path: Path) -> None:
    crash(tmp_path, CRASH)
    root = tmp_path / "checkpoints"
    # An intact copy of the first checkpoint, still under its temporary name...
    shutil.copytree(root / "checkpoint_000001", root / ".tmp-checkpoint_000003")
    # ...and one renamed into place whose manifest was never written.
    shutil.copytree(root / "checkpoint_000001", root / "checkpoint_000004")
    (root / "checkpoint_000004" / "manifest.json").unlink()
    probe = OnResume()
    with pytest.warns(UserWarning, match=r"checkpoint_000004: its manifest is missing"):
        state = fit(make(tmp_path, callbacks=[probe]))
    assert probe.resumed_at == (2, 8)
    assert state.finished
    assert not (root / ".tmp-checkpoint_000003").exists()


def test_resume_true_without_a_checkpoint_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match=r"resume=True, but .* holds no checkpoint"):
        fit(make(tmp_path, resume=True))


def test_resume_true_with_only_corrupt_checkpoints_is_an_error(tmp_path: Path) -> None:
    crash(tmp_path, CRASH)
    for folder in folders(tmp_path):
        (folder / "state.json").write_text("{}")
    with (
        pytest.warns(UserWarning, match="skipping checkpoint"),
        pytest.raises(CheckpointError, match=r"every checkpoint under .* is damaged"),
    ):
        fit(make(tmp_path, resume=True))


def test_resume_automatically_when_a_checkpoint_exists(tmp_path: Path) -> None:
    crash(tmp_path, CRASH)
    probe = OnResume()
    fit(make(tmp_path, callbacks=[probe]))
    assert probe.resumed_at == (2, 8)


@pytest.mark.parametrize(("resume", "at"), [(1, (1, 4)), (2, (2, 8)), (-1, (2, 8))])
def test_resume_an_index_picks_that_checkpoint(
    tmp_path: Path, resume: int, at: tuple[int, int]
) -> None:
    crash(tmp_path, CRASH)
    probe = OnResume()
    newer_aside = pytest.warns(UserWarning, match="resume=1: newer checkpoint_000002 moved")
    with newer_aside if resume == 1 else contextlib.nullcontext():
        state = fit(make(tmp_path, resume=resume, callbacks=[probe]))
    assert probe.resumed_at == at
    assert state.finished
    assert state.global_step == 12


def test_resume_an_older_index_sets_the_newer_checkpoints_aside(tmp_path: Path) -> None:
    crash(tmp_path, CRASH)
    newer = folders(tmp_path)[1]
    before = saved(newer)
    # Dies again before writing a checkpoint of its own: the next automatic resume must not
    # take the abandoned run's newer checkpoint for this run's.
    with pytest.warns(UserWarning, match=r"resume=1: newer checkpoint_000002 moved to"):
        crash(tmp_path, 5, resume=1)
    aside = tmp_path / "checkpoints.old-1" / newer.name
    assert saved(aside) == before
    assert [folder.name for folder in folders(tmp_path)] == ["checkpoint_000001"]
    probe = OnResume()
    fit(make(tmp_path, callbacks=[probe]))
    assert probe.resumed_at == (1, 4)


def test_resume_an_index_that_does_not_exist_names_those_that_do(tmp_path: Path) -> None:
    crash(tmp_path, CRASH)
    with pytest.raises(CheckpointError, match=r"no checkpoint 7 under .*available: \[1, 2\]"):
        fit(make(tmp_path, resume=7))


def test_resume_false_sets_old_checkpoints_aside_and_starts_afresh(tmp_path: Path) -> None:
    crash(tmp_path, CRASH)
    old = {
        path.relative_to(tmp_path / "checkpoints"): path.read_bytes()
        for path in (tmp_path / "checkpoints").rglob("*")
        if path.is_file()
    }
    probe = OnResume()
    with pytest.warns(UserWarning, match="resume=False: earlier checkpoints moved to"):
        state = fit(make(tmp_path, resume=False, callbacks=[probe]))
    assert probe.seen == []
    assert state.global_step == 12
    aside = tmp_path / "checkpoints.old-1"
    assert {
        path.relative_to(aside): path.read_bytes() for path in aside.rglob("*") if path.is_file()
    } == old
    assert [(saved(f).epoch, saved(f).finished) for f in folders(tmp_path)] == [
        (1, False),
        (2, False),
        (3, True),
    ]


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"hps": hps(batch_size=8)}, r"train_batch_size=16, but this run has train_batch_size=8"),
        (
            {"grad_accumulation_steps": 2},
            r"grad_accumulation_steps=1, but this run has grad_accumulation_steps=2",
        ),
        ({"train": blobs(80)}, r"batches_per_epoch=4, but this run has batches_per_epoch=5"),
    ],
)
def test_resume_with_other_settings_is_refused(
    tmp_path: Path, changes: dict[str, Any], message: str
) -> None:
    crash(tmp_path, CRASH)
    before = [saved(folder) for folder in folders(tmp_path)]
    train = changes.pop("train", None)
    with pytest.raises(CheckpointError, match=message):
        fit(make(tmp_path, **changes), train=train)
    assert [saved(folder) for folder in folders(tmp_path)] == before


def made_on_two_processes(path: Path, *, uncounted: bool = False) -> None:
    """Every checkpoint under ``path`` says it was made by 2 processes: its manifest says so,
    which is not among the files its digests cover, and it holds a part for each.
    ``uncounted``: and, like a loader that deals its batches itself, it could not count the
    batches of the order dealt to the processes."""
    for folder in folders(path):
        manifest = json.loads((folder / "manifest.json").read_text())
        manifest["world_size"] = 2
        # The second process's own part: a copy of the first's, listed with the same digest.
        shutil.copy(folder / "process_0.safetensors", folder / "process_1.safetensors")
        manifest["files"]["process_1.safetensors"] = manifest["files"]["process_0.safetensors"]
        if uncounted:
            manifest["order_batches"] = None
        (folder / "manifest.json").write_text(json.dumps(manifest))


@pytest.mark.parametrize(
    ("made", "steps"), [("finished", 16), ("epoch end", 12)], ids=["finished", "epoch-end"]
)
def test_a_checkpoint_of_another_number_of_processes_at_an_epoch_end_resumes(
    tmp_path: Path, made: str, steps: int
) -> None:
    if made == "finished":
        fit(make(tmp_path))
    else:  # crashed at step 7, after a checkpoint at the end of epoch 1
        crash(tmp_path, 7, checkpoint_every="epoch")
    made_on_two_processes(tmp_path)
    newest = folders(tmp_path)[-1].name
    with pytest.warns(UserWarning, match=f"resuming {newest}, made on 2 processes, on 1 process"):
        state = fit(make(tmp_path, hps=hps(epochs=4 if made == "finished" else 3)))
    assert state.global_step == steps


def test_a_moment_within_an_epoch_that_cannot_be_found_says_what_to_do(tmp_path: Path) -> None:
    # Crashed at step 7, after checkpoints at steps 3 and 6 (batch 2 of epoch 2).
    crash(tmp_path, 7, checkpoint_every="3 steps")
    made_on_two_processes(tmp_path, uncounted=True)
    with pytest.raises(CheckpointError) as refused:
        fit(make(tmp_path))
    message = str(refused.value)
    assert "was made on 2 processes, and this run has 1; " in message
    assert "it was made at batch 2 of epoch 2 (step 6), after 4 batches of the epoch's" in message
    assert "this run cannot count the batches of that order" in message
    assert "resume from a checkpoint made at an epoch's end" in message
    assert "pass resume=False to start afresh in this one" in message
    # As it says: resume=False starts afresh there, the checkpoints moved aside.
    with pytest.warns(UserWarning, match="resume=False: earlier checkpoints moved to"):
        assert fit(make(tmp_path, resume=False)).global_step == 12
    assert (tmp_path / "checkpoints.old-1").is_dir()


@pytest.mark.parametrize("max_steps", [6, 8])
def test_a_run_finished_within_an_epoch_on_other_processes_has_nothing_left_at_its_max_steps(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, max_steps: int
) -> None:
    # Finished at step 6, batch 2 of epoch 2, a moment this run cannot find (no order counted).
    fit(make(tmp_path, hps=hps(max_steps=6)))
    made_on_two_processes(tmp_path, uncounted=True)
    if max_steps == 6:  # nothing left to train: it says so, whatever the moment
        with caplog.at_level(logging.WARNING, logger="accmt_trainer"):
            assert fit(make(tmp_path, hps=hps(max_steps=6))).global_step == 6
        assert "already finished" in caplog.text
        return
    with pytest.raises(CheckpointError, match="this run cannot count the batches of that order"):
        fit(make(tmp_path, hps=hps(max_steps=max_steps)))


def test_a_finished_run_says_so_and_does_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    first = Classifier()
    fit(make(tmp_path), first)
    finished = weights(first)
    probe = OnResume()
    again = Classifier()
    with caplog.at_level(logging.WARNING, logger="accmt_trainer"):
        state = fit(make(tmp_path, callbacks=[probe]), again)
    assert "already finished" in caplog.text
    assert probe.order == []
    assert state.finished
    assert state.global_step == 12
    assert len(folders(tmp_path)) == 3
    # The model is left as the run finished it.
    assert same_weights(weights(again), finished)


# ------------------------------------------------------------------- what a resume restores


def test_on_resume_fires_once_after_on_fit_start_with_everything_restored(tmp_path: Path) -> None:
    crash(tmp_path, CRASH)
    checkpoint = folders(tmp_path)[-1]
    probe = OnResume()
    module = Classifier()
    trainer = make(tmp_path, callbacks=[probe])
    fit(trainer, module)
    assert probe.order[:3] == ["on_fit_start", "on_resume", "on_epoch_start"]
    assert probe.order.count("on_resume") == 1
    (seen,) = probe.seen
    assert seen["module"] is module
    assert seen["trainer"] is trainer
    assert seen["state"] is trainer.state
    assert seen["at"] == (2, 8)
    (model_file,) = (checkpoint / "accelerate").glob("*.safetensors")
    assert same_weights(seen["weights"], load_file(model_file))


class StepCounter(Callback):
    """A stateful callback: counts optimizer steps across resumes."""

    def __init__(self) -> None:
        self.steps = 0
        self.at_save: list[int] = []

    def on_after_optimizer_step(self, optimizer: Any) -> None:
        self.steps += 1

    def on_save_checkpoint(self) -> None:
        self.at_save.append(self.steps)

    def state_dict(self) -> dict[str, Any]:
        return {"steps": self.steps}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.steps = int(state["steps"])


class EarlyStoppingAtSave(EarlyStopping):
    """EarlyStopping that notes its (best, wait) at each checkpoint and at on_resume."""

    def __init__(self) -> None:
        super().__init__(monitor="loss", patience=10)
        self.at_save: list[tuple[float | None, int]] = []
        self.at_resume: list[tuple[float | None, int]] = []

    def on_save_checkpoint(self) -> None:
        self.at_save.append((self.best, self.wait))

    def on_resume(self) -> None:
        self.at_resume.append((self.best, self.wait))


def test_callback_states_survive_a_resume(tmp_path: Path) -> None:
    # With lr=0 the validation loss never improves after the first evaluation: wait grows.
    frozen = hps(optimizer_kwargs={"lr": 0.0})
    counter, early = StepCounter(), EarlyStoppingAtSave()
    crash(tmp_path, CRASH, hps=frozen, callbacks=[counter, early], val=blobs(16, seed=1))
    assert early.at_save[-1][1] == 1
    counter_again, early_again = StepCounter(), EarlyStoppingAtSave()
    state = fit(
        make(tmp_path, hps=frozen, callbacks=[counter_again, early_again]), val=blobs(16, seed=1)
    )
    assert early_again.at_resume == [early.at_save[-1]]
    assert state.patience_left["loss"] == 10 - 2
    assert (early_again.best, early_again.wait) == (early.at_save[-1][0], 2)
    assert counter.at_save == [4, 8]
    assert counter_again.steps == 12
