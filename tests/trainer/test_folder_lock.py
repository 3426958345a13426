"""One run per folder: a second run on a folder in use fails at once, naming the holder; a
lock left by a killed run blocks nothing. Both with real processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from accmt_callbacks import Callback
from accmt_trainer import Trainer, TrainerConfigError

WORKER = Path(__file__).parent / "workers" / "slow_run.py"
sys.path.insert(0, str(WORKER.parent))
from slow_run import Linear, data  # noqa: E402


class Steps(Callback):
    def __init__(self) -> None:
        self.count = 0

    def on_after_training_step(self) -> None:
        self.count += 1


def start(folder: Path, out: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.Popen([sys.executable, str(WORKER), str(folder), str(out)], env=env)


def wait_for_checkpoint(folder: Path, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 120
    while not (folder / "checkpoints" / "latest.json").exists():
        assert process.poll() is None, "the first run ended early"
        assert time.monotonic() < deadline, "the first run never checkpointed"
        time.sleep(0.05)


def second_run(folder: Path, **options: object) -> Trainer:
    from accmt_trainer import HyperParameters

    hps = HyperParameters(epochs=2, batch_size=8, optimizer="SGD", optimizer_kwargs={"lr": 0.1})
    return Trainer(
        hps,
        folder,
        checkpoint_every="1 step",
        seed=0,
        log_with=None,
        progress_bar=False,
        cpu=True,
        **options,
    )  # type: ignore[arg-type]


def final_weights(trainer: Trainer) -> dict[str, torch.Tensor]:
    return trainer.accelerator.unwrap_model(trainer.model).state_dict()  # type: ignore[no-any-return]


def test_a_second_run_on_a_folder_in_use_fails_at_once(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    first = start(folder, tmp_path / "first.pt")
    try:
        wait_for_checkpoint(folder, first)
        listing = sorted(p.name for p in (folder / "checkpoints").iterdir())
        started = time.monotonic()
        with pytest.raises(
            TrainerConfigError, match=rf"another run is using this folder.*PID {first.pid}"
        ):
            second_run(folder).fit(Linear(), data())
        assert time.monotonic() - started < 30
        assert first.poll() is None  # the first run is untouched and still training
    finally:
        assert first.wait(timeout=300) == 0
    assert len(listing) >= 2
    # The first run's checkpoints are intact, and its result is the uninterrupted one's.
    for checkpoint in (folder / "checkpoints").glob("checkpoint_*"):
        manifest = json.loads((checkpoint / "manifest.json").read_text())
        assert set(manifest["files"]) >= {"state.json", "process_0.safetensors"}
    reference = tmp_path / "reference"
    trainer = second_run(reference)
    trainer.fit(Linear(), data())
    expected = final_weights(trainer)
    got = torch.load(tmp_path / "first.pt", weights_only=True)
    assert all(torch.equal(got[k], expected[k]) for k in expected)
    # And they resume bit-exact: from the checkpoint half-way through the first run.
    checkpoints = sorted((folder / "checkpoints").glob("checkpoint_*"))
    middle = checkpoints[len(checkpoints) // 2]
    saved_at = json.loads((middle / "state.json").read_text())["global_step"]
    steps = Steps()
    resumed = second_run(folder, resume=int(middle.name.split("_")[1]), callbacks=[steps])
    # Resuming from an older checkpoint sets the newer ones aside, and says so.
    moved = rf"resume={int(middle.name.split('_')[1])}: newer checkpoint_.* moved to .*\.old-1"
    with pytest.warns(UserWarning, match=moved):
        state = resumed.fit(Linear(), data())
    assert 0 < saved_at < state.global_step == 24
    assert steps.count == 24 - saved_at  # it went on from there, not from the start
    weights = final_weights(resumed)
    assert all(torch.equal(weights[k], expected[k]) for k in expected)


def test_a_lock_left_by_a_killed_run_blocks_nothing(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    first = start(folder, tmp_path / "first.pt")
    wait_for_checkpoint(folder, first)
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=60)
    assert (folder / ".accmt.lock.holder.json").exists()  # it never got to let go
    state = second_run(folder).fit(Linear(), data())
    assert state.finished
    assert state.global_step == 24
