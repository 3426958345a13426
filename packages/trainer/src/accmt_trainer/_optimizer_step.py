"""Backward and the optimizer step: the one place that decides whether the optimizer stepped.

The Trainer's own step and an ``ExtendedAcceleratorModule``'s go through the same methods, so
gradient accumulation, clipping, mixed precision, the scheduler and their hooks behave alike.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Literal

import attrs
import torch
from accelerate import Accelerator
from accelerate.utils import memory
from torch.optim import Optimizer
from torch.optim.lr_scheduler import LRScheduler

from accmt_callbacks import CallbackHandler

from ._option_checks import positive_int

if TYPE_CHECKING:
    from accmt_state import TrainingState


def _every(instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    positive_int(attribute.name, value, allow_none=True)


@attrs.frozen(kw_only=True)
class StepOptions:
    """The Trainer's options of the optimizer step."""

    set_to_none: bool = True
    """``optimizer.zero_grad(set_to_none=...)``."""
    reset_optimizer_every_n_steps: int | None = attrs.field(default=None, validator=_every)
    """Clear the optimizer's state (moments, step counts) every N optimizer steps."""
    cleanup_cache_every_n_steps: int | None = attrs.field(default=None, validator=_every)
    """Empty the accelerator's cache (Accelerate's ``clear_device_cache``) every N steps."""


class OptimizerStep:
    """Owns backward, clipping, the optimizer and scheduler steps and zeroing gradients.

    On a batch that only accumulates (Accelerate's ``sync_gradients`` is False) the steps do
    nothing. :attr:`stepped` says, once per batch, whether the optimizer really stepped: not on
    an accumulating batch, not when mixed precision's scaler skipped it, not when
    ``skip_nonfinite`` found the gradients NaN or infinite.
    """

    def __init__(
        self,
        accelerator: Accelerator,
        model: torch.nn.Module,
        optimizer: Optimizer,
        scheduler: LRScheduler | None,
        callbacks: CallbackHandler,
        state: TrainingState,
        *,
        clip_grad: float | None,
        scheduler_per_epoch: bool,
        skip_nonfinite: bool,
        grad_norm_every: int | Literal["epoch"] | None,
        options: StepOptions | None = None,
    ) -> None:
        self.accelerator = accelerator
        self.model = model
        self.optimizer = optimizer
        self.scheduler = scheduler
        self.callbacks = callbacks
        self.state = state
        self.clip_grad = clip_grad
        self.scheduler_per_epoch = scheduler_per_epoch
        self.skip_nonfinite = skip_nonfinite
        self.grad_norm_every = grad_norm_every
        self.options = options or StepOptions()
        self.stepped = False
        """Whether the optimizer stepped on the current batch."""
        self._grad_norm: Any = None

    @property
    def grad_norm(self) -> float | None:
        """The gradient norm before clipping of the latest optimizer step, when it was measured
        (clipping, skipping, or a logged step with ``Monitor(grad_norm=True)``). Reading it
        syncs with the device; measuring it did not."""
        return None if self._grad_norm is None else float(self._grad_norm)

    def start_batch(self) -> None:
        """Called by the loop before each training batch."""
        self.stepped = False

    def backward(self, loss: torch.Tensor) -> None:
        """Backward through Accelerate: scales the loss for accumulation and mixed precision."""
        self.callbacks.call("on_before_backward", loss)
        self.accelerator.backward(loss)
        self.callbacks.call("on_after_backward")

    def step_optimizer(self, optimizer: Optimizer | None = None) -> None:
        """Clip (if asked), then step ``optimizer`` (the run's by default), on the batch that
        ends an accumulation window."""
        if not self.accelerator.sync_gradients:
            return
        optimizer = optimizer or self.optimizer
        self._measure_grad_norm()
        if self.skip_nonfinite and not math.isfinite(self.grad_norm or 0.0):
            # Every process holds the same synchronised gradients, so all skip together.
            self.state.skipped_steps += 1
            self.stepped = False
            return
        self.callbacks.call("on_before_optimizer_step", optimizer)
        optimizer.step()
        self.callbacks.call("on_after_optimizer_step", optimizer)
        self.stepped = not self.accelerator.optimizer_step_was_skipped

    def step_scheduler(self, scheduler: LRScheduler | None = None) -> None:
        """Step ``scheduler`` (the run's by default) after a real optimizer step; per-epoch
        schedulers wait for :meth:`end_epoch`."""
        if not self.scheduler_per_epoch and self.stepped:
            self._step(scheduler or self.scheduler)

    def end_epoch(self) -> None:
        """Step a per-epoch scheduler; called by the loop once per finished epoch."""
        if self.scheduler_per_epoch:
            self._step(self.scheduler)

    def zero_grad(self, optimizer: Optimizer | None = None) -> None:
        """Zero the gradients of ``optimizer`` (the run's by default) once they were used."""
        if not self.accelerator.sync_gradients:
            return
        optimizer = optimizer or self.optimizer
        self.callbacks.call("on_before_zero_grad", optimizer)
        optimizer.zero_grad(set_to_none=self.options.set_to_none)
        self.callbacks.call("on_after_zero_grad", optimizer)

    def after_step(self, global_step: int) -> None:
        """Called by the loop after each optimizer step (``global_step`` counts it): resets the
        optimizer's state and empties the device cache when they are due."""
        options = self.options
        every = options.reset_optimizer_every_n_steps
        if every is not None and global_step % every == 0:
            self.optimizer.state.clear()
        every = options.cleanup_cache_every_n_steps
        if every is not None and global_step % every == 0:
            memory.clear_device_cache(garbage_collection=True)

    def step(self, loss: torch.Tensor) -> None:
        """The whole optimizer step of an ordinary training batch."""
        self.backward(loss)
        self.step_optimizer()
        self.step_scheduler()
        self.zero_grad()

    def _step(self, scheduler: LRScheduler | None) -> None:
        if scheduler is None:
            return
        self.callbacks.call("on_before_scheduler_step", scheduler)
        scheduler.step()
        self.callbacks.call("on_after_scheduler_step", scheduler)

    def _measure_grad_norm(self) -> None:
        every = self.grad_norm_every
        if every == "epoch":
            logged = self.state.is_last_training_batch
        else:
            logged = every is not None and (self.state.global_step + 1) % every == 0
        if self.clip_grad is None and not self.skip_nonfinite and not logged:
            return
        limit = math.inf if self.clip_grad is None else self.clip_grad
        self._grad_norm = self.accelerator.clip_grad_norm_(self.model.parameters(), limit)
