"""MLflow and W&B runs survive a resume: a fit SIGKILLed after its checkpoint at step 12, having
logged steps 13 and 14, and resumed writes into the same tracker run, its hyperparameters logged
once, every step of the training loss there once.

The backends are real: MLflow on a SQLite database store (mlflow-skinny has no tracking server:
that needs the full mlflow), W&B offline, read back from its run files (``_wandb_files``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from accmt_callbacks import Callback
from accmt_trainer import TrainerConfigError

if TYPE_CHECKING:
    import mlflow

# mlflow and wandb are imported in the tests: the minimums run, without them, leaves this
# module's tests out by their marker, after importing it.
pytestmark = pytest.mark.trackers

WORKER = Path(__file__).parent / "workers" / "tracked_run.py"
sys.path.insert(0, str(WORKER.parent))
from tracked_run import fit  # noqa: E402

STEPS = list(range(1, 25))  # 2 epochs of 12 optimizer steps


def launch(folder: Path, tracker: str, number: int, env: dict[str, str], *kill: str) -> int:
    command = [sys.executable, str(WORKER), str(folder), tracker, str(number), *kill]
    environment = {**os.environ, "OMP_NUM_THREADS": "1", **env}
    done = subprocess.run(command, env=environment, capture_output=True, text=True, timeout=300)
    assert done.returncode in (0, -signal.SIGKILL), done.stderr[-3000:]
    return done.returncode


def killed_and_resumed(folder: Path, tracker: str, env: dict[str, str]) -> None:
    """The run killed as step 15 ends, before it is logged (its last checkpoint at 12), then
    resumed."""
    assert launch(folder, tracker, 1, env, "--kill-at-step", "15") == -signal.SIGKILL
    assert launch(folder, tracker, 2, env) == 0


def one_run(client: mlflow.MlflowClient, experiment: str) -> Any:
    """The experiment's run, the only one (a resume that made another would fail here)."""
    (found,) = client.search_experiments(filter_string=f"name = '{experiment}'")
    (run,) = client.search_runs([found.experiment_id])
    return run


def test_a_killed_and_resumed_mlflow_run_is_one_run_with_every_step_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import mlflow

    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    killed_and_resumed(tmp_path / "run", "mlflow", {"MLFLOW_TRACKING_URI": store})
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store)
    fit(tmp_path / "uninterrupted", "mlflow", launch=1, callbacks=[])

    client = mlflow.MlflowClient(tracking_uri=store)
    run, uninterrupted = one_run(client, "run"), one_run(client, "uninterrupted")
    losses = client.get_metric_history(run.info.run_id, "train/loss")
    # Steps 13 and 14 once: the killed launch logged them, the resumed one did not again.
    assert [point.step for point in losses] == STEPS
    validations = client.get_metric_history(run.info.run_id, "validation/loss")
    assert [point.step for point in validations] == [12, 24]
    # An exact resume: the killed launch's points after its checkpoint are the resumed one's.
    expected = client.get_metric_history(uninterrupted.info.run_id, "train/loss")
    assert [point.value for point in losses] == [point.value for point in expected]
    # The hyperparameters of the first launch, logged once (MLflow refuses a changed one).
    params = run.data.params
    assert params["launch"] == "1"
    assert params["optimizer"] == "SGD"


def test_a_killed_and_resumed_wandb_run_is_one_run_rewound_to_its_checkpoint(
    tmp_path: Path,
) -> None:
    from ._wandb_files import OfflineRun, synced_history

    env = {
        "WANDB_MODE": "offline",
        "WANDB_DIR": str(tmp_path),
        "WANDB_SILENT": "true",
        # W&B writes its run file every 15 s: a SIGKILL loses what came since. This run takes
        # seconds, so it flushes every 0.1 s to keep what a run of minutes would.
        "WANDB_X_TRANSACTION_LOG_FLUSH_INTERVAL": "0.1",
    }
    killed_and_resumed(tmp_path / "run", "wandb", env)

    folders = sorted((tmp_path / "wandb").glob("offline-run-*"))
    killed, resumed = (OfflineRun.read(folder) for folder in folders)
    assert killed.run_id == resumed.run_id  # one run
    # The killed launch logged steps 13 and 14 after its checkpoint (W&B completes a step's row
    # when a later step comes: 14's never did); the resumed one rewinds the run to the
    # checkpoint's step, 12, and logs from 13 on.
    assert sorted(killed.history["train/loss"]) == list(range(1, 14))
    assert resumed.rewinds_to == 12
    assert sorted(resumed.history["train/loss"]) == list(range(13, 25))
    synced = synced_history([killed, resumed], "train/loss")
    assert [step for step, _ in synced] == STEPS
    assert [step for step, _ in synced_history([killed, resumed], "validation/loss")] == [12, 24]
    # The hyperparameters, logged by the first launch only.
    assert killed.config["launch"] == 1
    assert killed.config["optimizer"] == "SGD"
    assert "launch" not in resumed.config


class StepCount(Callback):
    steps = 0

    def on_after_training_step(self) -> None:
        self.steps += 1


def test_a_resume_whose_mlflow_run_is_not_in_the_store_is_refused_before_training(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import mlflow

    store = f"sqlite:///{tmp_path / 'first.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store)
    fit(tmp_path / "run", "mlflow", launch=1, callbacks=[], epochs=1)
    newest = sorted((tmp_path / "run" / "checkpoints").glob("checkpoint_*"))[-1]
    run_id = json.loads((newest / "trackers.json").read_text())["mlflow"]
    assert run_id == one_run(mlflow.MlflowClient(tracking_uri=store), "run").info.run_id

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'another.db'}")
    counted = StepCount()
    with pytest.raises(TrainerConfigError, match=f"mlflow run '{run_id}' cannot be continued"):
        fit(tmp_path / "run", "mlflow", launch=2, callbacks=[counted], epochs=2)
    assert counted.steps == 0
