"""Only a run that reached its own end is finished; one stopped early continues when fit
again; the same weights are never evaluated twice; damaged checkpoints are not trained over."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from accmt_callbacks import Callback
from accmt_metrics import Accuracy
from accmt_trainer import CheckpointError, HyperParameters, Trainer

from .conftest import Classifier, blobs


def make(folder: Path, **options: Any) -> Trainer:
    hps = options.pop("hps", HyperParameters(epochs=3, batch_size=8, optimizer_kwargs={"lr": 0.1}))
    return Trainer(hps, folder, log_with=None, progress_bar=False, metrics=[Accuracy()], **options)


class Evaluations(Callback):
    def __init__(self, stop_at: int | None = None) -> None:
        self.at: list[int] = []
        self.stop_at = stop_at

    def on_evaluation_end(self) -> None:
        assert self.state is not None
        self.at.append(self.state.global_step)
        if self.state.global_step == self.stop_at:
            self.request_stop("enough")


@pytest.mark.parametrize("grow", ["max_steps", "epochs"])
def test_a_run_ended_by_max_steps_continues_with_a_larger_budget(tmp_path: Path, grow: str) -> None:
    capped = HyperParameters(epochs=2, max_steps=5, batch_size=8, optimizer_kwargs={"lr": 0.1})
    state = make(tmp_path, hps=capped).fit(Classifier(), blobs(32), blobs(16, seed=1))
    assert (state.global_step, state.finished) == (5, True)
    again = make(tmp_path, hps=capped).fit(Classifier(), blobs(32), blobs(16, seed=1))
    assert again.global_step == 5  # finished: nothing more to do
    larger = {"max_steps": 7} if grow == "max_steps" else {"epochs": 3, "max_steps": None}
    more = HyperParameters(
        **{"epochs": 2, "max_steps": 5, "batch_size": 8, "optimizer_kwargs": {"lr": 0.1}, **larger}
    )
    state = make(tmp_path, hps=more).fit(Classifier(), blobs(32), blobs(16, seed=1))
    assert (state.global_step, state.finished) == ((7, True) if grow == "max_steps" else (12, True))


def test_a_stop_after_a_step_evaluation_does_not_evaluate_the_same_weights(tmp_path: Path) -> None:
    evaluations = Evaluations(stop_at=6)
    run = make(tmp_path, evaluate_every_n_steps=3, callbacks=[evaluations], eval_when_finish=True)
    state = run.fit(Classifier(), blobs(32), blobs(16, seed=1))
    assert evaluations.at == [3, 4, 6]  # step 3, epoch 1's end, step 6: no second look at 6
    assert not state.finished
    assert state.last_evaluation_step == 6


def test_every_checkpoint_damaged_is_an_error_not_a_fresh_start(tmp_path: Path) -> None:
    make(tmp_path, hps=HyperParameters(epochs=2, batch_size=8)).fit(Classifier(), blobs(32))
    checkpoints = sorted((tmp_path / "checkpoints").glob("checkpoint_*"))
    for folder in checkpoints:
        (folder / "state.json").write_text("{}")
    with (
        pytest.warns(UserWarning, match="skipping checkpoint"),
        pytest.raises(CheckpointError, match="is damaged") as caught,
    ):
        make(tmp_path, hps=HyperParameters(epochs=2, batch_size=8)).fit(Classifier(), blobs(32))
    assert str(tmp_path / "checkpoints") in str(caught.value)
    assert all(f"{f.name}: state.json" in str(caught.value) for f in checkpoints)
    # resume=False starts afresh, moving the damaged ones aside.
    with pytest.warns(UserWarning, match="moved to"):
        state = make(tmp_path, hps=HyperParameters(epochs=2, batch_size=8), resume=False).fit(
            Classifier(), blobs(32)
        )
    assert state.finished
    assert (tmp_path / "checkpoints.old-1").is_dir()
