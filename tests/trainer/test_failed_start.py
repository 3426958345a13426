"""A run that fails before its first step leaves its folders as it found them: a folder that
did not exist does not exist after, and one that existed holds what it held, byte for byte (no
``logs/``, no lock files, no ``checkpoints/``, no checkpoint moved aside)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from accmt_metrics import Accuracy
from accmt_trainer import CheckpointError, HyperParameters, Trainer, TrainerConfigError

from .conftest import Classifier, blobs


def trainer(folder: Path, epochs: int = 1, batch_size: int = 8, **options: Any) -> Trainer:
    hps = HyperParameters(
        epochs=epochs, batch_size=batch_size, optimizer="SGD", optimizer_kwargs={"lr": 0.1}
    )
    options = {"log_with": "tensorboard", "progress_bar": False, **options}
    return Trainer(hps, folder, metrics=[Accuracy()], **options)


def with_a_typo(run: Trainer) -> Trainer:
    run.register_model_saving("acuracy")  # the sanity check refuses it before the first step
    return run


def fails(run: Trainer, error: type[Exception] = TrainerConfigError) -> None:
    with pytest.raises(error):
        run.fit(Classifier(), blobs(32), blobs(16, seed=1))


def contents(folder: Path) -> dict[str, bytes | None]:
    """Every path under ``folder``, with a file's bytes (None for a folder)."""
    return {
        str(path.relative_to(folder)): path.read_bytes() if path.is_file() else None
        for path in sorted(folder.rglob("*"))
    }


def test_a_folder_that_did_not_exist_does_not_exist_after(tmp_path: Path) -> None:
    fails(with_a_typo(trainer(tmp_path / "new" / "run")))
    assert list(tmp_path.iterdir()) == []


def test_a_folder_that_existed_is_unchanged(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    (folder / "data").mkdir(parents=True)
    (folder / "data" / "notes.txt").write_text("mine")
    before = contents(folder)
    fails(with_a_typo(trainer(folder, logging_dir=tmp_path / "elsewhere" / "logs")))
    assert contents(folder) == before
    assert sorted(path.name for path in tmp_path.iterdir()) == ["run"]


@pytest.mark.parametrize("resume", [False, 1])
def test_a_trained_folder_keeps_its_checkpoints_in_place(
    tmp_path: Path, resume: bool | int
) -> None:
    trainer(tmp_path, epochs=2).fit(Classifier(), blobs(32), blobs(16, seed=1))
    before = contents(tmp_path)
    assert "checkpoints/checkpoint_000002/manifest.json" in before
    # resume=False would move every checkpoint aside, resume=1 the newer one: not before the
    # run's checks passed.
    fails(with_a_typo(trainer(tmp_path, epochs=3, resume=resume)))
    assert contents(tmp_path) == before


def test_a_checkpoint_that_cannot_be_resumed_leaves_the_folder_unchanged(tmp_path: Path) -> None:
    trainer(tmp_path).fit(Classifier(), blobs(32), blobs(16, seed=1))
    before = contents(tmp_path)
    fails(trainer(tmp_path, batch_size=4), CheckpointError)
    assert contents(tmp_path) == before


def test_a_run_that_starts_writes_its_folders(tmp_path: Path) -> None:
    # The other side: once the checks pass, the run's folders are made and kept.
    trainer(tmp_path / "run").fit(Classifier(), blobs(32), blobs(16, seed=1))
    made = contents(tmp_path / "run")
    assert ".accmt.lock" in made
    assert any(name.startswith("logs/run/events.out.") for name in made)
