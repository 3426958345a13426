"""HyperParameterSearch on one process: trials in their folders, a study that continues,
pruning through the Trainer's stop request, failures recorded, Ctrl-C resumable, seeded."""

from __future__ import annotations

import csv
import logging
import math
import os
import signal
import threading
from pathlib import Path
from typing import Any

import optuna
import pytest
from optuna.trial import TrialState
from torch.utils.data import TensorDataset

from accmt_callbacks import Callback
from accmt_metrics import Accuracy
from accmt_search import (
    EvaluationMetrics,
    HyperParameterSearch,
    SearchConfigError,
    SearchResult,
    StudyError,
)
from accmt_trainer import HyperParameters

from ._data import DigitsMLP, PruneTrial

Data = tuple[TensorDataset, TensorDataset]
SPACE: dict[str, Any] = {
    "epochs": 2,
    "batch_size": 32,
    "optimizer": "AdamW",
    "optimizer_kwargs.lr": {"type": "float", "low": 1e-3, "high": 3e-2, "log": True},
    "module.hidden": {"type": "categorical", "choices": [16, 32]},
}
STEPS_PER_EPOCH = 13  # 400 training samples in batches of 32


def read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, encoding="utf-8") as stream:
        return list(csv.DictReader(stream))


def record(trial: optuna.trial.FrozenTrial) -> dict[str, Any]:
    found: dict[str, Any] = trial.user_attrs["accmt_search"]
    return found


class Builds:
    """get_module_fn that remembers what each call was given."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def __call__(self, hidden: int = 32) -> DigitsMLP:
        self.calls.append({"hidden": hidden})
        return DigitsMLP(hidden)


class Hooks(Callback):
    """Writes each trial's fit hooks to a file (each trial gets its own copy of a callback)."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)

    def _write(self, what: str) -> None:
        with open(self.path, "a", encoding="utf-8") as stream:
            stream.write(f"{self.trainer.model_path.name} {what} {self.state.global_step}\n")

    def on_fit_end(self) -> None:
        self._write("fit_end")

    def on_exception(self, exception: BaseException) -> None:
        self._write("exception")


def search(data: Data, folder: Path, build: Any = None, **options: Any) -> HyperParameterSearch:
    train, valid = data
    options.setdefault("log_with", None)
    options.setdefault("metrics", [Accuracy()])
    found = HyperParameterSearch(build or Builds(), train, valid, output_dir=folder, **options)
    found.set_space(SPACE)
    return found


def test_each_trial_trains_in_its_folder_and_the_best_is_written(
    data: Data, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="accmt_search")
    build = Builds()
    found = search(data, tmp_path, build, seed=0, log_with="tensorboard")
    result = found.optimize(
        lambda metrics: metrics["validation"]["accuracy"], "maximize", n_trials=3
    )
    assert isinstance(result, SearchResult)
    assert found.study is not None
    trials = found.study.get_trials()
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 3
    best = max(trials, key=lambda t: t.value or 0.0)
    assert (result.trial_number, result.value, result.params) == (
        best.number,
        best.value,
        best.params,
    )
    # Each trial built its module with its own sampled argument, and trained in trial_<n>/.
    assert [call["hidden"] for call in build.calls] == [t.params["module.hidden"] for t in trials]
    assert result.module_kwargs == {"hidden": best.params["module.hidden"]}
    for trial in trials:
        folder = tmp_path / f"trial_{trial.number}"
        assert record(trial)["folder"] == folder.name
        assert list((folder / "logs").rglob("events.out.tfevents.*")), "no logs of its own"
        assert not (folder / "checkpoints").exists()  # an ended trial does not need them
        assert record(trial)["optimizer_steps"] == 2 * STEPS_PER_EPOCH
    assert result.hps.optimizer_kwargs["lr"] == best.params["optimizer_kwargs.lr"]
    assert HyperParameters.from_yaml(tmp_path / "best_hps.yaml") == result.hps
    rows = read_csv(tmp_path / "trials.csv")
    assert [row["state"] for row in rows] == ["COMPLETE"] * 3
    assert {"params_optimizer_kwargs.lr", "params_module.hidden", "optimizer_steps"} <= set(rows[0])
    for plot in ("optimization_history", "param_importances", "parallel_coordinate"):
        assert (tmp_path / "plots" / f"{plot}.png").stat().st_size > 1000
    # What the plots' axes say, kept in the study for a later run's plots.
    assert found.study.user_attrs["accmt_search_objective"] == "validation accuracy"
    (table,) = [r.getMessage() for r in caplog.records if "best 3 of" in r.getMessage()]
    assert "best 3 of 3 trials (3 complete):" in table
    assert table.splitlines()[2].split()[0] == str(best.number)


def test_optimize_continues_the_study_in_the_folder_up_to_n_trials(
    data: Data, tmp_path: Path
) -> None:
    first = Builds()
    search(data, tmp_path, first).optimize(n_trials=2, plots=False)
    again = Builds()
    result = search(data, tmp_path, again).optimize(n_trials=3, plots=False)
    assert len(first.calls) == 2
    assert len(again.calls) == 1  # only the trial left to reach 3
    assert result.finished == 3
    done = Builds()
    search(data, tmp_path, done).optimize(n_trials=3, plots=False)
    assert done.calls == []
    study = optuna.load_study(study_name="accmt-search", storage=f"sqlite:///{tmp_path}/study.db")
    assert [t.number for t in study.trials] == [0, 1, 2]


def test_a_pruned_trial_ends_through_the_stop_request(data: Data, tmp_path: Path) -> None:
    hooks = tmp_path / "hooks.txt"
    found = search(data, tmp_path / "search", callbacks=[Hooks(hooks)])
    found.optimize(n_trials=3, pruner=PruneTrial(1), plots=False)
    assert found.study is not None
    states = [t.state for t in found.study.trials]
    assert states == [TrialState.COMPLETE, TrialState.PRUNED, TrialState.COMPLETE]
    pruned = found.study.trials[1]
    # Stopped after its first evaluation (the end of epoch 1), not at the end of its 2 epochs.
    assert record(pruned)["optimizer_steps"] == STEPS_PER_EPOCH
    assert list(pruned.intermediate_values) == [1]
    # Every fit ended normally, on_fit_end included: nothing was raised into user code.
    assert hooks.read_text().splitlines() == [
        f"trial_0 fit_end {2 * STEPS_PER_EPOCH}",
        f"trial_1 fit_end {STEPS_PER_EPOCH}",
        f"trial_2 fit_end {2 * STEPS_PER_EPOCH}",
    ]


def test_a_failing_trial_is_recorded_with_its_error_and_the_search_goes_on(
    data: Data, tmp_path: Path
) -> None:
    calls = []

    def build(hidden: int = 32) -> DigitsMLP:
        calls.append(hidden)
        if len(calls) == 2:
            raise ValueError("this configuration does not build")
        return DigitsMLP(hidden)

    found = search(data, tmp_path, build)
    result = found.optimize(n_trials=3, plots=False)
    assert found.study is not None
    states = [t.state for t in found.study.trials]
    assert states == [TrialState.COMPLETE, TrialState.FAIL, TrialState.COMPLETE]
    failed = record(found.study.trials[1])
    assert failed["outcome"] == "failed"
    assert failed["error"] == "ValueError: this configuration does not build"
    assert result.finished == 3  # a trial failed by its own error counts toward n_trials
    rows = read_csv(tmp_path / "trials.csv")
    assert rows[1]["error"] == "ValueError: this configuration does not build"


def test_a_search_where_no_trial_completes_says_so(data: Data, tmp_path: Path) -> None:
    found = search(data, tmp_path)
    with pytest.raises(StudyError, match=r"no trial completed \(fail: 2\)"):
        found.optimize(lambda metrics: math.nan, n_trials=2, plots=False)
    assert found.study is not None
    errors = [record(t)["error"] for t in found.study.trials]
    assert errors == ["the objective is nan (best_metric_fn of the last evaluation)"] * 2


class InterruptAt(Callback):
    """Sends this process SIGINT (Ctrl-C) at one optimizer step of one trial."""

    def __init__(self, folder: str, step: int) -> None:
        self.folder, self.step = folder, step

    def on_after_training_step(self) -> None:
        if self.trainer.model_path.name == self.folder and self.state.global_step == self.step:
            os.kill(os.getpid(), signal.SIGINT)


def test_ctrl_c_ends_the_trial_cleanly_and_its_retry_resumes_from_the_checkpoint(
    data: Data, tmp_path: Path
) -> None:
    step = STEPS_PER_EPOCH + 4
    first = search(data, tmp_path, callbacks=[InterruptAt("trial_1", step)])
    interrupted = first.optimize(n_trials=3, plots=False)
    assert interrupted.interrupted
    assert interrupted.finished == 1
    assert first.study is not None
    states = [t.state for t in first.study.trials]
    # The cut trial is failed and queued again with its parameters.
    assert states == [TrialState.COMPLETE, TrialState.FAIL, TrialState.WAITING]
    assert first.study.trials[2].params == first.study.trials[1].params
    assert list((tmp_path / "trial_1" / "checkpoints").glob("checkpoint_*"))

    resumed = search(data, tmp_path).optimize(n_trials=3, plots=False)
    assert not resumed.interrupted
    study = optuna.load_study(study_name="accmt-search", storage=f"sqlite:///{tmp_path}/study.db")
    retry = record(study.trials[2])
    assert study.trials[2].state == TrialState.COMPLETE
    assert retry["retry_of"] == 1
    assert retry["folder"] == "trial_1"
    # Resumed from the checkpoint the Trainer wrote for the signal (at the end of the step it
    # came in), and trained only the rest.
    assert retry["resumed_from_step"] == step
    assert retry["global_step"] == 2 * STEPS_PER_EPOCH
    assert retry["optimizer_steps"] == 2 * STEPS_PER_EPOCH - step
    assert [t.state for t in study.trials].count(TrialState.COMPLETE) == 3


def test_a_seeded_search_is_reproducible(data: Data, tmp_path: Path) -> None:
    runs = []
    for name in ("a", "b"):
        found = search(data, tmp_path / name, seed=3)
        found.optimize(n_trials=3, plots=False)
        assert found.study is not None
        runs.append([(t.params, t.value) for t in found.study.trials])
    assert runs[0] == runs[1]
    assert len({str(params) for params, _ in runs[0]}) == 3


def test_best_metric_fn_reads_each_named_validation_set(data: Data, tmp_path: Path) -> None:
    train, valid = data
    seen: list[EvaluationMetrics] = []

    def objective(metrics: EvaluationMetrics) -> float:
        seen.append(metrics)
        return metrics["clean"]["loss"]

    sets = {"clean": valid, "again": valid}
    found = HyperParameterSearch(
        DigitsMLP, train, sets, metrics=[Accuracy()], output_dir=tmp_path, log_with=None
    )
    lr = {"type": "float", "low": 1e-3, "high": 1e-2}
    found.set_space({"epochs": 1, "batch_size": 64, "optimizer_kwargs.lr": lr})
    result = found.optimize(objective, n_trials=1, plots=False)
    assert set(seen[-1]) == {"clean", "again"}
    assert set(seen[-1]["again"]) == {"loss", "accuracy"}
    assert result.value == seen[-1]["clean"]["loss"]


def test_options_are_checked_before_any_trial(data: Data, tmp_path: Path) -> None:
    train, valid = data
    with pytest.raises(SearchConfigError, match="model_path"):
        HyperParameterSearch(DigitsMLP, train, valid, model_path=tmp_path)
    with pytest.raises(SearchConfigError, match="checkpoint_evry"):
        HyperParameterSearch(DigitsMLP, train, valid, checkpoint_evry="epoch")
    with pytest.raises(SearchConfigError, match="val_dataset"):
        HyperParameterSearch(DigitsMLP, train, None)  # type: ignore[arg-type]
    found = HyperParameterSearch(DigitsMLP, train, valid, output_dir=tmp_path, log_with=None)
    with pytest.raises(SearchConfigError, match="set_space"):
        found.optimize()
    found.set_space(
        {"epochs": 1, "optimizer_kwargs.lr": {"type": "float", "low": 0.01, "high": 0.1}}
    )
    with pytest.raises(SearchConfigError, match="direction"):
        found.optimize(direction="down")
    with pytest.raises(SearchConfigError, match="n_trials"):
        found.optimize(n_trials=0)
    assert not (tmp_path / "study.db").exists()


def test_a_study_is_continued_only_in_its_direction(data: Data, tmp_path: Path) -> None:
    search(data, tmp_path).optimize(n_trials=1, plots=False)
    with pytest.raises(StudyError, match="was made to minimize, not to maximize"):
        search(data, tmp_path).optimize(direction="maximize", n_trials=2, plots=False)


class Locked(Callback):
    """A callback that cannot be deep-copied (it holds a lock)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.fits = 0

    def on_fit_end(self) -> None:
        self.fits += 1


def test_a_callback_that_cannot_be_copied_is_shared_by_the_trials(
    data: Data, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    locked = Locked()
    search(data, tmp_path, callbacks=[locked]).optimize(n_trials=2, plots=False)
    assert locked.fits == 2
    assert "Locked cannot be copied for each trial" in caplog.text


def test_the_best_trial_is_read_from_the_study_when_the_space_changed(
    data: Data, tmp_path: Path
) -> None:
    first = search(data, tmp_path).optimize(n_trials=1, plots=False)
    changed = search(data, tmp_path)
    changed.set_space({**SPACE, "module.hidden": {"type": "categorical", "choices": [64]}})
    again = changed.optimize(n_trials=1, plots=False)
    assert again.trial_number == first.trial_number == 0
    assert again.module_kwargs == first.module_kwargs
    assert again.hps == first.hps


def test_an_output_dir_that_cannot_be_written_is_named_before_any_trial(
    data: Data, tmp_path: Path
) -> None:
    (tmp_path / "a_file").write_text("not a folder")
    folder = tmp_path / "a_file" / "search"
    build = Builds()
    found = search(data, folder, build)
    match = (
        rf"HyperParameterSearch\(output_dir='{folder}'\): the folder cannot be written: "
        r"\[Errno 20\] Not a directory: .*; pass an output_dir"
    )
    with pytest.raises(SearchConfigError, match=match) as caught:
        found.optimize(n_trials=2, plots=False)
    assert isinstance(caught.value.__cause__, OSError)
    assert build.calls == []  # no trial built a module
