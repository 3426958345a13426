"""LambdaCallback and PrintLogger."""

from __future__ import annotations

from typing import Any

import pytest

from accmt_callbacks import HOOKS, Callback, CallbackHandler, LambdaCallback, PrintLogger
from accmt_state import TrainingState

from ._loop import fit


def test_lambda_functions_get_the_callback_then_the_hook_arguments() -> None:
    seen: list[tuple[str, Any]] = []
    callback = LambdaCallback(
        on_fit_start=lambda cb: seen.append(("start", cb.state.epoch)),
        on_before_training_step=lambda cb, batch: seen.append(("batch", batch)),
        on_before_backward=lambda cb, loss: seen.append(("loss", loss)),
    )
    fit(CallbackHandler([callback]), TrainingState(), train=[4, 5])
    assert seen == [("start", 0), ("batch", 4), ("loss", 4.0), ("batch", 5), ("loss", 5.0)]
    assert callback.hooks == ("on_fit_start", "on_before_training_step", "on_before_backward")


def test_lambda_counts_only_the_hooks_given() -> None:
    from accmt_callbacks._handler import overridden

    callback = LambdaCallback(on_epoch_end=lambda cb: None)
    assert [hook for hook in HOOKS if overridden(callback, hook)] == ["on_epoch_end"]
    assert [hook for hook in HOOKS if overridden(LambdaCallback(), hook)] == []


def test_lambda_rejects_unknown_hooks_with_the_valid_ones() -> None:
    with pytest.raises(TypeError, match="'on_epoch_ending', which is not a hook") as info:
        LambdaCallback(on_epoch_ending=lambda cb: None)
    assert all(hook in str(info.value) for hook in HOOKS)
    with pytest.raises(TypeError, match="'on_a', 'on_b', which are not hooks"):
        LambdaCallback(on_b=lambda cb: None, on_a=lambda cb: None)
    with pytest.raises(TypeError, match="state_dict"):
        LambdaCallback(state_dict=lambda cb: {})


def test_lambda_rejects_non_callables_and_wrong_signatures() -> None:
    with pytest.raises(TypeError, match=r"LambdaCallback\(on_fit_start=...\) takes a function"):
        LambdaCallback(on_fit_start=3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"called as f\(callback, loss\)"):
        LambdaCallback(on_before_backward=lambda cb: None)
    with pytest.raises(TypeError, match=r"called as f\(callback\)"):
        LambdaCallback(on_fit_end=lambda: None)
    LambdaCallback(on_before_backward=lambda *args: None)  # anything that binds is fine
    LambdaCallback(on_fit_end=print)  # no signature to check: accepted


def test_lambda_can_request_a_stop() -> None:
    handler = CallbackHandler(
        [LambdaCallback(on_after_training_step=lambda cb: cb.request_stop("enough"))]
    )
    state = TrainingState()
    fit(handler, state, train=[1, 2, 3], epochs=3)
    assert (handler.should_stop, handler.stop_reason, state.batch_iteration) == (True, "enough", 1)


def test_a_trainer_flag_set_by_a_callback_stops_the_loop() -> None:
    class Stopper(Callback):
        def on_after_training_step(self) -> None:
            if self.state is not None and self.state.batch_iteration == 2:
                self.trainer.should_stop = True

    handler = CallbackHandler([Stopper()])
    state = TrainingState()
    fit(handler, state, train=[1, 2, 3], epochs=2)
    assert state.batch_iteration == 2
    assert handler.should_stop is False  # the loop read the trainer's flag


@pytest.fixture
def single_process(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "SLURM_PROCID"):
        monkeypatch.delenv(name, raising=False)


def metrics(index: int) -> dict[str, dict[str, Any]]:
    return {"valid": {"loss": 0.5 / (index + 1), "accuracy": 0.9}, "test": {"n": 3}}


@pytest.mark.usefixtures("single_process")
def test_print_logger_prints_each_evaluation(capsys: pytest.CaptureFixture[str]) -> None:
    fit(
        CallbackHandler([PrintLogger()]),
        TrainingState(),
        train=[1, 2],
        valid={"valid": [1], "test": [1]},
        epochs=2,
        metrics=metrics,
    )
    assert capsys.readouterr().out.splitlines() == [
        "epoch 0 step 2 | valid: loss=0.5 accuracy=0.9",
        "epoch 0 step 2 | test: n=3",
        "epoch 1 step 4 | valid: loss=0.25 accuracy=0.9",
        "epoch 1 step 4 | test: n=3",
    ]


@pytest.mark.usefixtures("single_process")
def test_print_logger_prints_the_loss_every_n_optimizer_steps(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Six batches, accumulating two: the optimizer steps at batches 2, 4 and 6.
    fit(
        CallbackHandler([PrintLogger(every_n_steps=2)]),
        TrainingState(),
        train=[1, 2, 3, 4, 5, 6],
        accumulate=2,
    )
    assert capsys.readouterr().out.splitlines() == ["epoch 0 step 2 | train: loss=4"]


def test_print_logger_is_silent_off_the_main_process(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    fit(
        CallbackHandler([PrintLogger(every_n_steps=1)]),
        TrainingState(),
        train=[1, 2],
        valid={"valid": [1]},
        metrics=metrics,
    )
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("every", [0, -1, 1.5, True, "2"])
def test_print_logger_validates_every_n_steps(every: Any) -> None:
    with pytest.raises(ValueError, match="every_n_steps must be None or an int of 1 or more"):
        PrintLogger(every_n_steps=every)
