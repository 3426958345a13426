"""The Callback base class: every hook a training loop fires, each a documented no-op.

It imports nothing of ``_handler.py`` (which imports it): a callback's ``handler`` is typed by
``CallbackHandlerProtocol``, the public surface of ``CallbackHandler``, defined here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from ._errors import CallbackNotBoundError

if TYPE_CHECKING:
    import os
    from collections.abc import Mapping

    from torch import Tensor
    from torch.optim import Optimizer
    from torch.optim.lr_scheduler import LRScheduler

    from accmt_state import TrainingState

# Every hook, in the order a fit meets them, with the arguments the loop passes (after self).
HOOK_ARGUMENTS: dict[str, tuple[str, ...]] = {
    "on_fit_start": (),
    "on_resume": (),
    "on_epoch_start": (),
    "on_before_training_step": ("batch",),
    "on_before_backward": ("loss",),
    "on_after_backward": (),
    "on_before_optimizer_step": ("optimizer",),
    "on_after_optimizer_step": ("optimizer",),
    "on_before_scheduler_step": ("scheduler",),
    "on_after_scheduler_step": ("scheduler",),
    "on_before_zero_grad": ("optimizer",),
    "on_after_zero_grad": ("optimizer",),
    "on_after_training_step": (),
    "on_evaluation_start": (),
    "on_before_validation_step": ("batch",),
    "on_after_validation_step": (),
    "on_evaluation_end": (),
    "on_save_checkpoint": (),
    "on_epoch_end": (),
    "on_fit_end": (),
    "on_cuda_out_of_memory": ("exception",),
    "on_runtime_error": ("exception",),
    "on_keyboard_interrupt": ("exception",),
    "on_exception": ("exception",),
}

HOOKS: tuple[str, ...] = tuple(HOOK_ARGUMENTS)
"""The name of every hook a loop may fire through ``CallbackHandler.call``, in fit order."""

# The hooks ``CallbackHandler.dispatch_exception`` chooses from; they may fire before binding.
EXCEPTION_HOOKS = (
    "on_cuda_out_of_memory",
    "on_runtime_error",
    "on_keyboard_interrupt",
    "on_exception",
)


class CallbackHandlerProtocol(Protocol):
    """What a callback's ``handler`` is: the public attributes and methods of
    ``CallbackHandler``, with its signatures, each documented there.

    ``CallbackHandler`` is the one implementation (mypy checks it where ``add`` sets
    ``callback.handler``); the protocol exists so that this module need not import the
    handler's, which imports this one.
    """

    should_stop: bool
    stop_reason: str

    @property
    def callbacks(self) -> tuple[Callback, ...]: ...

    def add(self, callback: Callback) -> None: ...

    def request_stop(self, reason: str) -> None: ...

    def clear_stop(self) -> None: ...

    def bind(self, *, module: Any = None, trainer: Any = None, state: TrainingState) -> None: ...

    def call(self, hook: str, /, *args: Any) -> None: ...

    def dispatch_exception(self, exc: BaseException) -> None: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, states: Mapping[str, Any], *, strict: bool = True) -> None: ...

    def save_state(self, path: str | os.PathLike[str]) -> None: ...

    def load_state(self, path: str | os.PathLike[str], *, strict: bool = True) -> None: ...


class Callback:
    """User code that a training loop calls at every stage of training.

    Subclass it and override the hooks you need; every hook here is a no-op, and a
    ``CallbackHandler`` calls only the hooks a callback overrides. Each hook's docstring says
    exactly when a loop fires it; the package README lists them in order.

    Attributes, all None until the handler binds them (``CallbackHandler.bind``), which happens
    before the first hook fires:

    - ``module``: the model or module being trained (the Trainer's ``AcceleratorModule``).
    - ``trainer``: the object running the loop (the Trainer, or whatever a custom loop passes).
    - ``state``: the run's ``accmt_state.TrainingState``, the same object the loop updates.
    - ``handler``: the ``CallbackHandler`` this callback was added to (set by ``add``), typed
      as ``CallbackHandlerProtocol``: the handler's public attributes and methods.

    Hooks run on every process of a distributed job; decorate a hook with
    ``accmt_decorators.on_main_process`` (or another selector) to run it on fewer.

    A callback that keeps state across a checkpoint overrides both ``state_dict`` and
    ``load_state_dict``; see ``state_key`` for running two of one class.
    """

    module: Any = None
    trainer: Any = None
    state: TrainingState | None = None
    handler: CallbackHandlerProtocol | None = None

    @property
    def state_key(self) -> str:
        """The key of this callback's ``state_dict`` among all callbacks' (a checkpoint's).

        The class's qualified name by default. Two stateful callbacks of one class in one
        handler need distinct keys: override this property (``EarlyStopping`` includes its
        monitor). The handler refuses duplicates when they are added.
        """
        return type(self).__qualname__

    def state_dict(self) -> dict[str, Any]:
        """What of this callback a checkpoint should keep, as plain data.

        Override it together with ``load_state_dict``. Return a dict with string keys whose
        values are JSON data (dicts, lists, str, int, float, bool, None) or anything
        ``accmt_state.converter`` unstructures into it (attrs instances, tuples, numpy and torch
        scalars; NaN and infinities are written as tagged objects and read back). The handler
        calls it when the loop collects callback state for a checkpoint, after
        ``on_save_checkpoint``. The base class keeps nothing.
        """
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what ``state_dict`` returned, read back from a checkpoint.

        ``state`` comes back as JSON data: tuples come back as lists. The loop calls it when
        resuming, before ``on_fit_start``. The base class restores nothing.
        """

    def request_stop(self, reason: str = "") -> None:
        """Ask the loop to stop training at its next stopping point.

        Calls ``handler.request_stop`` with ``reason`` (or a sentence naming this callback),
        which sets ``handler.should_stop``. When the bound ``trainer`` has a ``should_stop``
        attribute it is set to True as well, for loops that read their own flag; the accmt
        Trainer's ``should_stop`` is the handler's own, and it stops at the end of the current
        optimizer step (after that step's log, evaluation and checkpoint). Nothing exits the
        process; the loop ends the fit normally.
        """
        handler = self.handler
        if handler is None:
            raise CallbackNotBoundError(
                f"{type(self).__qualname__}.request_stop() was called on a callback that is not "
                "in a CallbackHandler; add it to one first (CallbackHandler([callback]))"
            )
        handler.request_stop(reason or f"{type(self).__qualname__} requested a stop")
        if hasattr(self.trainer, "should_stop") and not self.trainer.should_stop:
            self.trainer.should_stop = True

    # The fit.

    def on_fit_start(self) -> None:
        """Fires once per fit, before any other hook, once the handler is bound.

        When resuming, the TrainingState and callback states (``load_state_dict``) are already
        restored; ``on_resume`` follows.
        """

    def on_resume(self) -> None:
        """Fires once, right after ``on_fit_start``, only when the fit resumes from a checkpoint.

        The TrainingState and every callback's state are restored: ``state`` says where
        training continues from. Nothing fires for a fit that starts from scratch.
        """

    def on_fit_end(self) -> None:
        """Fires once, last, when the fit ends normally: all epochs done or a stop requested.

        It does not fire when an exception ends the fit; one of the exception hooks does.
        """

    def on_save_checkpoint(self) -> None:
        """Fires each time the loop writes a checkpoint, just before it collects state.

        ``state`` is up to date for the checkpoint; the loop calls ``handler.state_dict()`` after
        this hook, so what a callback changes here is saved. The loop writes checkpoints after a
        training step or an evaluation, never in the middle of a step.
        """

    def on_epoch_start(self) -> None:
        """Fires at the start of each epoch, before its first training batch.

        ``state.epoch`` is that epoch. It fires once per epoch of the run: an epoch resumed
        part-way already fired it before the interruption, so a resume fires ``on_resume``
        instead, before the epoch's remaining batches.
        """

    def on_epoch_end(self) -> None:
        """Fires when an epoch's training ends, after its last training step.

        Also after the evaluation that runs at the end of the epoch, if any; the epoch's
        checkpoint, if one is due, follows this hook. ``state.epoch`` is still that epoch. An
        epoch cut short by a stop request does not end: ``on_fit_end`` follows the step where
        the stop was requested (at the end of that optimizer step, with a checkpoint).
        """

    # One training step, in this order. The optimizer, scheduler and zero_grad hooks fire only
    # on the batches where the optimizer steps (with gradient accumulation, the last batch of
    # each accumulation window).

    def on_before_training_step(self, batch: Any) -> None:
        """Fires for every training batch, first, before the forward pass.

        ``batch`` is the batch as the loop feeds it to the model (already on its device).
        ``state`` still counts the steps before this one.
        """

    def on_before_backward(self, loss: Tensor) -> None:
        """Fires for every training batch, after the forward pass, right before backward.

        ``loss`` is the value the loop is about to backpropagate (with gradient accumulation,
        already divided by the number of accumulated batches if the loop does so).
        """

    def on_after_backward(self) -> None:
        """Fires for every training batch, right after backward.

        The gradients of this batch have been added to the parameters' gradients.
        """

    def on_before_optimizer_step(self, optimizer: Optimizer) -> None:
        """Fires right before ``optimizer.step()``, only on batches where the optimizer steps.

        Gradients are final (summed over the accumulation window, clipped if the loop clips).
        ``optimizer`` is the optimizer the loop steps (Accelerate's wrapper in the Trainer).
        """

    def on_after_optimizer_step(self, optimizer: Optimizer) -> None:
        """Fires right after ``optimizer.step()``, only on batches where the optimizer steps."""

    def on_before_scheduler_step(self, scheduler: LRScheduler) -> None:
        """Fires right before ``scheduler.step()``, after ``on_after_optimizer_step``.

        Only on batches where the optimizer stepped, and only in loops that have a scheduler.
        ``scheduler`` is the scheduler the loop steps (Accelerate's wrapper in the Trainer).
        """

    def on_after_scheduler_step(self, scheduler: LRScheduler) -> None:
        """Fires right after ``scheduler.step()``, when ``on_before_scheduler_step`` fired."""

    def on_before_zero_grad(self, optimizer: Optimizer) -> None:
        """Fires right before ``optimizer.zero_grad()``, after the optimizer and scheduler step.

        Only on batches where the optimizer stepped; the gradients are still there to inspect.
        """

    def on_after_zero_grad(self, optimizer: Optimizer) -> None:
        """Fires right after ``optimizer.zero_grad()``, when ``on_before_zero_grad`` fired."""

    def on_after_training_step(self) -> None:
        """Fires for every training batch, last, after backward and any optimizer step.

        The loop has advanced its counters for this batch: ``state`` counts it. Evaluations and
        checkpoints that are due after this batch happen after this hook.
        """

    # One evaluation: every validation set, every batch.

    def on_evaluation_start(self) -> None:
        """Fires once per evaluation, before the first batch of the first validation set."""

    def on_before_validation_step(self, batch: Any) -> None:
        """Fires for every validation batch of every validation set, before its forward pass.

        ``batch`` is the batch as the loop feeds it to the model (already on its device).
        """

    def on_after_validation_step(self) -> None:
        """Fires for every validation batch, after its forward pass and metric update.

        The loop has advanced ``state.val_step`` for this batch.
        """

    def on_evaluation_end(self) -> None:
        """Fires once per evaluation, after the last batch of every validation set.

        The loop has written this evaluation's results into ``state.additional_metrics``
        (validation set name -> metric name -> value) and counted it in
        ``state.evaluations_done``; ``EarlyStopping`` reads them here.
        """

    # When an exception ends the fit, ``CallbackHandler.dispatch_exception`` fires exactly one
    # of these, before the loop re-raises the exception. ``on_fit_end`` does not fire then.
    # ``state`` is None if the exception came before the handler was bound.

    def on_cuda_out_of_memory(self, exception: RuntimeError) -> None:
        """Fires when a CUDA out-of-memory error ends the fit, before the loop re-raises it.

        That is ``torch.OutOfMemoryError`` (``torch.cuda.OutOfMemoryError``) or a RuntimeError
        whose message says "CUDA out of memory". ``on_runtime_error`` does not fire for it.
        """

    def on_runtime_error(self, exception: RuntimeError) -> None:
        """Fires when a RuntimeError other than CUDA out-of-memory ends the fit.

        Fires before the loop re-raises ``exception``.
        """

    def on_keyboard_interrupt(self, exception: KeyboardInterrupt) -> None:
        """Fires when a KeyboardInterrupt (Ctrl-C) ends the fit, before the loop re-raises it."""

    def on_exception(self, exception: BaseException) -> None:
        """Fires when any other exception ends the fit, before the loop re-raises it.

        Any exception that is neither a RuntimeError nor a KeyboardInterrupt (a ValueError, a
        SystemExit, ...).
        """
