"""Every hook of a run, in the documented order; a killed run and its mid-epoch resume fire
together exactly the hooks of the uninterrupted run past the checkpoint it resumed from."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from accmt_callbacks import HOOKS, Callback
from accmt_metrics import Accuracy
from accmt_trainer import HyperParameters, Trainer

from ._hook_spec import documented
from .conftest import Classifier, blobs

HPS = {
    "epochs": 2,
    "batch_size": 16,
    "optimizer": "SGD",
    "optimizer_kwargs": {"lr": 0.1},
    "scheduler": "StepLR",
    "scheduler_kwargs": {"step_size": 1},
}
SHAPE = {"epochs": 2, "batches": 4, "evaluate_every": 3, "checkpoint_every": 2}


class Record(Callback):
    """Records every hook by name; raises once at ``fail_at_step`` to stand for a kill."""

    def __init__(self, fail_at_step: int | None = None) -> None:
        self.hooks: list[str] = []
        self.fail_at_step = fail_at_step

    def on_after_training_step(self) -> None:
        self.hooks.append("on_after_training_step")
        if self.state is not None and self.state.global_step == self.fail_at_step:
            raise RuntimeError("killed")


def _record(hook: str) -> Any:
    return lambda self, *args: self.hooks.append(hook)


for _hook in HOOKS:
    if _hook != "on_after_training_step":
        setattr(Record, _hook, _record(_hook))


def fit(folder: Path, record: Record) -> None:
    trainer = Trainer(
        HyperParameters.from_dict(HPS),
        folder,
        evaluate_every_n_steps=3,
        checkpoint_every="2 steps",
        callbacks=[record],
        log_with=None,
        progress_bar=False,
        metrics=[Accuracy()],
    )
    trainer.fit(Classifier(), blobs(64), blobs(16, seed=1))


def test_an_uninterrupted_run_fires_the_documented_hooks(tmp_path: Path) -> None:
    record = Record()
    fit(tmp_path / "run", record)
    assert record.hooks == documented(**SHAPE)


def test_a_killed_run_and_its_resume_fire_the_uninterrupted_run_s_hooks(tmp_path: Path) -> None:
    expected = documented(**SHAPE)
    killed = Record(fail_at_step=7)
    with pytest.raises(RuntimeError, match="killed"):
        fit(tmp_path / "run", killed)
    assert killed.hooks[-1] == "on_runtime_error"
    # The last checkpoint was step 6's, in the middle of epoch 1.
    kept = len(killed.hooks) - 1 - killed.hooks[::-1].index("on_save_checkpoint")
    before_kill = killed.hooks[: kept + 1]
    resumed = Record()
    fit(tmp_path / "run", resumed)
    # A mid-epoch resume fires on_resume, not on_epoch_start: that epoch started before.
    assert resumed.hooks[:3] == ["on_fit_start", "on_resume", "on_before_training_step"]
    assert before_kill + resumed.hooks[2:] == expected
