"""SIGTERM, Ctrl-C and the requeue signal: the run finishes its step, checkpoints, fires its
hooks and returns, saying what stopped it; a resume then reaches the uninterrupted run's weights
bit for bit. Repeated signals never lose the stop's checkpoint, a second Ctrl-C ends at once,
and under SLURM the requeue signal's stop requeues the job once, after its checkpoint."""

from __future__ import annotations

import logging
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from accmt_callbacks import Callback
from accmt_state import TrainingState
from accmt_trainer import EXIT_RESUMABLE, TrainerConfigError, exit_status

from ._fake_scontrol import calls, fake_scontrol, on_path
from .conftest import Classifier, blobs
from .test_checkpoints import fit, folders, hps, make, same_weights, saved, weights

# 64 samples in batches of 8, two batches an optimizer step: 4 steps an epoch, 3 epochs.
SETUP: dict[str, Any] = {"hps": hps(batch_size=8), "grad_accumulation_steps": 2, "seed": 3}
STEPS = 12


class Events(Callback):
    """Records the hooks that matter here, with (epoch, global_step) at each."""

    def __init__(self) -> None:
        self.events: list[tuple[str, int, int]] = []

    def _note(self, hook: str) -> None:
        assert self.state is not None
        self.events.append((hook, self.state.epoch, self.state.global_step))

    def on_epoch_start(self) -> None:
        self._note("on_epoch_start")

    def on_before_training_step(self, batch: Any) -> None:
        self._note("on_before_training_step")

    def on_evaluation_start(self) -> None:
        self._note("on_evaluation_start")

    def on_save_checkpoint(self) -> None:
        self._note("on_save_checkpoint")

    def on_epoch_end(self) -> None:
        self._note("on_epoch_end")

    def on_fit_end(self) -> None:
        self._note("on_fit_end")

    def hooks(self) -> list[str]:
        return [hook for hook, _, _ in self.events]


class SignalInStep(Callback):
    """Sends ``signum`` to this process on the first micro-batch of optimizer step ``step``
    (``times`` times, back to back)."""

    def __init__(self, signum: int, step: int, times: int = 1) -> None:
        self.signum, self.step, self.times, self.sent = signum, step, times, False

    def on_before_training_step(self, batch: Any) -> None:
        assert self.state is not None
        if not self.sent and self.state.global_step == self.step - 1:
            self.sent = True
            for _ in range(self.times):
                os.kill(os.getpid(), self.signum)


class SignalInEvaluation(Callback):
    """Sends SIGTERM to this process when the evaluation at the end of ``epoch`` starts."""

    def __init__(self, epoch: int) -> None:
        self.epoch, self.sent = epoch, False

    def on_evaluation_start(self) -> None:
        assert self.state is not None
        if not self.sent and self.state.epoch == self.epoch:
            self.sent = True
            os.kill(os.getpid(), signal.SIGTERM)


def uninterrupted(path: Path) -> tuple[TrainingState, dict[str, Any]]:
    module = Classifier(dropout=0.2)
    state = fit(make(path, **SETUP), module, val=blobs(16, seed=1))
    return state, weights(module)


def resume(path: Path, events: Events) -> tuple[TrainingState, dict[str, Any]]:
    module = Classifier(dropout=0.2)
    state = fit(make(path, callbacks=[events], **SETUP), module, val=blobs(16, seed=1))
    return state, weights(module)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_mid_step_finishes_the_step_checkpoints_and_resumes_exactly(
    tmp_path: Path, signum: int
) -> None:
    expected_state, expected = uninterrupted(tmp_path / "reference")
    before = signal.getsignal(signum)
    events = Events()
    run = tmp_path / "run"
    # Step 6 is the second of epoch 1; the signal comes on its first of two batches.
    state = fit(
        make(run, callbacks=[SignalInStep(signum, 6), events], **SETUP),
        Classifier(dropout=0.2),
        val=blobs(16, seed=1),
    )
    assert signal.getsignal(signum) is before
    assert not state.finished
    assert (state.epoch, state.global_step, state.batches_seen_in_epoch) == (1, 6, 4)
    name = signal.Signals(signum).name
    assert (state.stop_signal, state.stop_reason) == (name, f"received {name}")
    assert exit_status(state) == EXIT_RESUMABLE == 75
    # Both batches of step 6 ran, then the checkpoint and on_fit_end, and nothing else.
    assert events.events[-4:] == [
        ("on_before_training_step", 1, 5),
        ("on_before_training_step", 1, 5),
        ("on_save_checkpoint", 1, 6),
        ("on_fit_end", 1, 6),
    ]
    newest = saved(folders(run)[-1])
    assert (newest.global_step, newest.batches_seen_in_epoch, newest.finished) == (6, 4, False)
    assert newest.stop_signal == name

    again = Events()
    state, got = resume(run, again)
    assert again.events[0] == ("on_before_training_step", 1, 6)
    assert state.finished
    assert (state.stop_signal, state.stop_reason, exit_status(state)) == (None, None, 0)
    assert state.global_step == STEPS
    assert state.evaluations_done == expected_state.evaluations_done
    assert state.model_savings == expected_state.model_savings
    assert same_weights(got, expected)


@pytest.mark.parametrize("epoch", [0, 2])
def test_a_signal_between_steps_checkpoints_at_the_epoch_boundary(
    tmp_path: Path, epoch: int
) -> None:
    _, expected = uninterrupted(tmp_path / "reference")
    events = Events()
    run = tmp_path / "run"
    # No checkpoint falls due at an epoch's end: the one after the signal is the Trainer's.
    state = fit(
        make(
            run, callbacks=[SignalInEvaluation(epoch), events], checkpoint_every="5 steps", **SETUP
        ),
        Classifier(dropout=0.2),
        val=blobs(16, seed=1),
    )
    at = (epoch + 1, 4 * (epoch + 1))
    assert (state.epoch, state.global_step) == at
    if at[1] == STEPS:
        # The signal came in the last epoch's evaluation, which finished: the run reached its
        # end, and fitting again trains and evaluates nothing more.
        assert state.finished
        again = Events()
        final, got = resume(run, again)
        assert again.hooks().count("on_evaluation_start") == 0
        assert (final.global_step, final.evaluations_done) == (STEPS, state.evaluations_done)
        assert same_weights(got, expected)
        return
    assert not state.finished
    # The evaluation the signal came in finished, its epoch ended, and no other step ran.
    assert events.hooks()[-4:] == [
        "on_evaluation_start",
        "on_epoch_end",
        "on_save_checkpoint",
        "on_fit_end",
    ]
    assert events.hooks().count("on_epoch_start") == epoch + 1
    newest = saved(folders(run)[-1])
    assert (newest.epoch, newest.global_step, newest.finished) == (*at, False)

    again = Events()
    state, got = resume(run, again)
    assert state.finished
    assert state.global_step == STEPS
    steps = again.hooks().count("on_before_training_step")
    assert steps == 2 * (STEPS - at[1])
    assert same_weights(got, expected)


@pytest.mark.parametrize("handle_signals", [True, False])
def test_handle_signals_false_leaves_the_handlers_alone(
    tmp_path: Path, handle_signals: bool
) -> None:
    during: list[object] = []
    caught = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR2)

    class Look(Callback):
        def on_fit_start(self) -> None:
            during.extend(signal.getsignal(s) for s in caught)

    before = [signal.getsignal(s) for s in caught]
    trainer = make(
        tmp_path, callbacks=[Look()], handle_signals=handle_signals, requeue_signal="usr2"
    )
    fit(trainer)
    assert [a == b for a, b in zip(during, before, strict=True)] == [not handle_signals] * 3
    assert [signal.getsignal(s) for s in caught] == before


def test_a_repeated_sigterm_is_ignored_and_the_stop_keeps_its_checkpoint(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Under SLURM a process can get SIGTERM twice at once (slurmstepd, and a launcher that
    # forwards it): the second is ignored, with one line, and the stop is checkpointed.
    with caplog.at_level(logging.WARNING, logger="accmt_trainer"):
        state = fit(
            make(tmp_path, callbacks=[SignalInStep(signal.SIGTERM, 6, times=3)], **SETUP),
            Classifier(dropout=0.2),
        )
    assert (state.global_step, state.finished, state.stop_signal) == (6, False, "SIGTERM")
    assert saved(folders(tmp_path)[-1]).global_step == 6
    again = [r.getMessage() for r in caplog.records if "received SIGTERM again" in r.getMessage()]
    assert len(again) == 1, again
    assert "ignored" in again[0]


def test_a_second_ctrl_c_ends_fit_at_once(tmp_path: Path) -> None:
    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        fit(make(tmp_path, callbacks=[SignalInStep(signal.SIGINT, 6, times=2)], **SETUP))
    assert signal.getsignal(signal.SIGINT) is before
    assert all(saved(folder).global_step < 6 for folder in folders(tmp_path))


@pytest.mark.parametrize("status", [0, 1])
def test_the_requeue_signal_stops_then_requeues_the_slurm_job_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, status: int
) -> None:
    run = tmp_path / "run"
    monkeypatch.setenv("PATH", on_path(fake_scontrol(tmp_path, run / "checkpoints", status)))
    monkeypatch.setenv("SLURM_JOB_ID", "78")
    monkeypatch.setenv("SLURM_ARRAY_JOB_ID", "77")
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "1")
    with caplog.at_level(logging.WARNING, logger="accmt_trainer"):
        state = fit(make(run, callbacks=[SignalInStep(signal.SIGUSR1, 6, times=2)], **SETUP))
    assert (state.global_step, state.stop_signal, exit_status(state)) == (6, "SIGUSR1", 75)
    newest = folders(run)[-1]
    # Called once (the repeated signal made no second call), for the array task, by this
    # process, when the stop's checkpoint was already the newest one.
    [call] = calls(tmp_path)
    assert call == {
        "args": ["requeue", "77_1"],
        "caller": os.getpid(),
        "latest": newest.name,
        "manifest": True,
    }
    said = " ".join(r.getMessage() for r in caplog.records)
    if status == 0:
        assert f"requeued SLURM job 77_1: it resumes from {newest}" in said
    else:  # SLURM refused (a job submitted with --no-requeue): said, and the stop stands
        assert "SLURM job 77_1 was not requeued: scontrol requeue said: exit status 1" in said


def test_no_requeue_without_auto_requeue_or_outside_slurm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", on_path(fake_scontrol(tmp_path, tmp_path / "run" / "checkpoints")))
    monkeypatch.delenv("SLURM_ARRAY_JOB_ID", raising=False)
    monkeypatch.setenv("SLURM_JOB_ID", "78")
    usr1 = [SignalInStep(signal.SIGUSR1, 2)]
    state = fit(make(tmp_path / "run", callbacks=usr1, auto_requeue=False, **SETUP))
    assert (state.global_step, state.stop_signal) == (2, "SIGUSR1")
    monkeypatch.delenv("SLURM_JOB_ID")
    fit(make(tmp_path / "run", callbacks=[SignalInStep(signal.SIGUSR1, 4)], **SETUP))
    assert calls(tmp_path) == []


@pytest.mark.parametrize(
    ("given", "name"), [("SIGUSR1", "SIGUSR1"), ("usr2", "SIGUSR2"), (15, "SIGTERM"), (None, None)]
)
def test_requeue_signal_takes_a_name_or_a_number(tmp_path: Path, given: Any, name: Any) -> None:
    assert make(tmp_path, requeue_signal=given).fit_options.requeue_signal == name


@pytest.mark.parametrize("bad", ["SIGKILL", "SIGINT", "USR3", 9, True, 1.0])
def test_requeue_signal_refuses_what_cannot_be_one(tmp_path: Path, bad: Any) -> None:
    with pytest.raises(TrainerConfigError, match=r"requeue_signal=.*SIGUSR1, SIGUSR2, SIGTERM"):
        make(tmp_path, requeue_signal=bad)


def test_an_extended_run_is_not_finished_until_its_new_end(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    first = fit(make(tmp_path, hps=hps(batch_size=8, epochs=1)))
    assert first.finished
    # Given more epochs, the run goes on: the checkpoint of its second epoch is not finished.
    extended = {"hps": hps(batch_size=8, epochs=3)}
    state = fit(make(tmp_path, **extended))
    assert (state.epoch, state.finished) == (3, True)
    assert [saved(folder).finished for folder in folders(tmp_path)] == [True, False, True]
    # Resumed from there, it says where it stands, not that it had finished.
    with (
        caplog.at_level(logging.INFO, logger="accmt_trainer"),
        pytest.warns(UserWarning, match="newer checkpoint_000003 moved"),
    ):
        state = fit(make(tmp_path, resume=2, **extended))
    line = next(r.getMessage() for r in caplog.records if r.getMessage().startswith("resuming"))
    assert "from checkpoint_000002: epoch 2/3 done" in line
    assert "had finished" not in line
    assert (state.finished, state.stop_reason, state.stop_signal) == (True, None, None)
