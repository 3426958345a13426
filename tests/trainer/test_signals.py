"""SIGTERM and Ctrl-C: the run finishes its step, checkpoints, fires its hooks and returns;
a resume then reaches the uninterrupted run's weights bit for bit."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest

from accmt_callbacks import Callback
from accmt_state import TrainingState

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
    """Sends ``signum`` to this process on the first micro-batch of optimizer step ``step``."""

    def __init__(self, signum: int, step: int) -> None:
        self.signum, self.step, self.sent = signum, step, False

    def on_before_training_step(self, batch: Any) -> None:
        assert self.state is not None
        if not self.sent and self.state.global_step == self.step - 1:
            self.sent = True
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
    # Both batches of step 6 ran, then the checkpoint and on_fit_end, and nothing else.
    assert events.events[-4:] == [
        ("on_before_training_step", 1, 5),
        ("on_before_training_step", 1, 5),
        ("on_save_checkpoint", 1, 6),
        ("on_fit_end", 1, 6),
    ]
    newest = saved(folders(run)[-1])
    assert (newest.global_step, newest.batches_seen_in_epoch, newest.finished) == (6, 4, False)

    again = Events()
    state, got = resume(run, again)
    assert again.events[0] == ("on_before_training_step", 1, 6)
    assert state.finished
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

    class Look(Callback):
        def on_fit_start(self) -> None:
            during.extend(signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT))

    before = [signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)]
    fit(make(tmp_path, callbacks=[Look()], handle_signals=handle_signals))
    assert (during == before) is not handle_signals
    assert [signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)] == before
