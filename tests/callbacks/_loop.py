"""A small hand-written training loop (no Trainer, no torch) that fires hooks as the README says,
and a callback that records every hook it receives."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from accmt_callbacks import HOOKS, Callback, CallbackHandler
from accmt_state import TrainingState

Metrics = dict[str, dict[str, Any]]

# A training step that steps the optimizer, hook by hook, as the README lists it.
TRAINING_STEP = (
    "on_before_training_step",
    "on_before_backward",
    "on_after_backward",
    "on_before_optimizer_step",
    "on_after_optimizer_step",
    "on_before_scheduler_step",
    "on_after_scheduler_step",
    "on_before_zero_grad",
    "on_after_zero_grad",
    "on_after_training_step",
)


class FakeTrainer:
    """What the loop binds as ``trainer``: like the accmt Trainer, it has a should_stop flag."""

    def __init__(self) -> None:
        self.should_stop = False


class FakeOptimizer:
    def __init__(self) -> None:
        self.steps = 0

    def step(self) -> None:
        self.steps += 1

    def zero_grad(self) -> None:
        pass


class FakeScheduler:
    def step(self) -> None:
        pass


MODULE = object()
OPTIMIZER = FakeOptimizer()
SCHEDULER = FakeScheduler()


def fit(
    handler: CallbackHandler,
    state: TrainingState,
    *,
    train: list[Any],
    valid: dict[str, list[Any]] | None = None,
    epochs: int = 1,
    accumulate: int = 1,
    metrics: Callable[[int], Metrics] | None = None,
    fail: Callable[[TrainingState], None] | None = None,
    resume: bool = False,
    trainer: FakeTrainer | None = None,
    scheduler: bool = True,
) -> None:
    """Train for ``epochs`` over ``train``, evaluating ``valid`` at the end of every epoch.

    ``metrics(evaluation_index)`` gives the metrics each evaluation writes into the state;
    ``fail(state)`` runs at every training step, after the forward pass, and may raise.
    """
    trainer = trainer if trainer is not None else FakeTrainer()
    valid = valid if valid is not None else {}
    handler.bind(module=MODULE, trainer=trainer, state=state)

    def stop_requested() -> bool:
        return handler.should_stop or trainer.should_stop

    try:
        handler.call("on_fit_start")
        if resume:
            handler.call("on_resume")
        for epoch in range(state.epoch, epochs):
            state.update(epoch=epoch)
            handler.call("on_epoch_start")
            for index, batch in enumerate(train):
                handler.call("on_before_training_step", batch)
                loss = float(batch)  # the forward pass
                if fail is not None:
                    fail(state)
                handler.call("on_before_backward", loss)
                handler.call("on_after_backward")
                if (index + 1) % accumulate == 0 or index == len(train) - 1:
                    handler.call("on_before_optimizer_step", OPTIMIZER)
                    OPTIMIZER.step()
                    handler.call("on_after_optimizer_step", OPTIMIZER)
                    if scheduler:
                        handler.call("on_before_scheduler_step", SCHEDULER)
                        SCHEDULER.step()
                        handler.call("on_after_scheduler_step", SCHEDULER)
                    handler.call("on_before_zero_grad", OPTIMIZER)
                    OPTIMIZER.zero_grad()
                    handler.call("on_after_zero_grad", OPTIMIZER)
                    state.update(global_step=state.global_step + 1)
                state.update(
                    train_step=state.train_step + 1, batch_iteration=state.batch_iteration + 1
                )
                handler.call("on_after_training_step")
                if stop_requested():
                    break
            if valid and not stop_requested():
                handler.call("on_evaluation_start")
                for batches in valid.values():
                    for batch in batches:
                        handler.call("on_before_validation_step", batch)
                        state.update(val_step=state.val_step + 1)
                        handler.call("on_after_validation_step")
                if metrics is not None:
                    state.additional_metrics.clear()
                    state.additional_metrics.update(metrics(state.evaluations_done))
                state.update(evaluations_done=state.evaluations_done + 1)
                handler.call("on_evaluation_end")
            handler.call("on_epoch_end")
            if stop_requested():
                break
        handler.call("on_fit_end")
    except BaseException as error:
        handler.dispatch_exception(error)
        raise


class Recorder(Callback):
    """Records (hook, arguments) for every hook fired on it."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    def names(self) -> list[str]:
        return [hook for hook, _ in self.calls]


def _recording(hook: str) -> Callable[..., None]:
    def record(self: Recorder, *args: Any) -> None:
        self.calls.append((hook, args))

    record.__name__ = record.__qualname__ = hook
    return record


for _hook in HOOKS:
    setattr(Recorder, _hook, _recording(_hook))
