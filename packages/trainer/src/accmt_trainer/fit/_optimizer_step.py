"""Backward and the optimizer step: the one place that decides whether the optimizer stepped.

The Trainer's own step and an ``ExtendedAcceleratorModule``'s go through the same methods, so
gradient accumulation, clipping, mixed precision, the scheduler and their hooks behave alike.

An optimizer step's gradient is the mean over the items of its whole window, whatever the
split. Accelerate divides each loss by the accumulation steps and DDP averages the processes;
at the window's end the gradients are rescaled on the device: by ``steps / batches`` for a
window shorter than the accumulation (an epoch's last), and for summed losses by
``processes * steps / items``, the items of the window on every process (one all-reduce of a
scalar, no host sync).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Literal

import attrs
import torch
from accelerate import Accelerator
from accelerate.optimizer import AcceleratedOptimizer
from accelerate.utils import DistributedType, memory
from torch.optim import Optimizer
from torch.optim.lr_scheduler import LRScheduler

from accmt_callbacks import CallbackHandler

from .._errors import StepOutputError
from ..config import clip_value, one_of, option, positive_int
from ..evaluation import scalar
from ._nonfinite import NONFINITE_POLICIES, NonFinitePolicy

if TYPE_CHECKING:
    from accmt_state import TrainingState


_EVERY = option(positive_int, allow_none=True)


@attrs.frozen(kw_only=True)
class StepOptions:
    """The Trainer's options of the optimizer step, checked when the Trainer is made."""

    clip_grad: float | None = attrs.field(default=None, converter=clip_value)
    """Clip the gradient norm to this value before each optimizer step (None: no clipping)."""
    set_to_none: bool = True
    """``optimizer.zero_grad(set_to_none=...)``."""
    reset_optimizer_every_n_steps: int | None = attrs.field(default=None, validator=_EVERY)
    """Clear the optimizer's state (moments, step counts) every N optimizer steps."""
    cleanup_cache_every_n_steps: int | None = attrs.field(default=None, validator=_EVERY)
    """Empty the accelerator's cache (Accelerate's ``clear_device_cache``) every N steps."""
    on_nonfinite_loss: NonFinitePolicy = attrs.field(
        default="error", validator=option(one_of, NONFINITE_POLICIES)
    )
    """``"error"``, ``"warn"`` or ``"skip"`` (skip the optimizer step whose gradients are not
    finite)."""


class OptimizerStep:
    """Owns backward, clipping, the optimizer and scheduler steps and zeroing gradients.

    On a batch that only accumulates (Accelerate's ``sync_gradients`` is False) the steps do
    nothing. :attr:`stepped` says, once per batch, whether the optimizer really stepped: not on
    an accumulating batch, not when mixed precision's scaler skipped it, not when
    ``on_nonfinite_loss="skip"`` found the gradients NaN or infinite.
    """

    def __init__(
        self,
        accelerator: Accelerator,
        model: torch.nn.Module,
        optimizer: Optimizer,
        scheduler: LRScheduler | None,
        callbacks: CallbackHandler,
        state: TrainingState,
        options: StepOptions,
        *,
        scheduler_per_epoch: bool,
        grad_norm_every: int | Literal["epoch"] | None,
    ) -> None:
        self.accelerator = accelerator
        self.model = model
        self.optimizer = optimizer
        self.scheduler = scheduler
        self.callbacks = callbacks
        self.state = state
        self.clip_grad = options.clip_grad
        self.scheduler_per_epoch = scheduler_per_epoch
        self.on_nonfinite_loss = options.on_nonfinite_loss
        self.grad_norm_every = grad_norm_every
        self.options = options
        self.stepped = False
        """Whether the optimizer stepped on the current batch."""
        self._window_batches = 0
        self._window_counted = False  # whether the window's batches give num_items
        self._window_numbers = 0  # items given as ints
        self._window_tensors = False  # whether some were given as tensors, added to:
        self._tensor_items = torch.zeros((), dtype=torch.float64, device=accelerator.device)
        self._parameters = list(model.parameters())
        self._grad_norm: Any = None
        self._direct = direct_optimizer(optimizer, accelerator)

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
        self._rescale_window()
        self._measure_grad_norm()
        direct = self._direct if optimizer is self.optimizer else None
        if self.on_nonfinite_loss == "skip" and not math.isfinite(self.grad_norm or 0.0):
            # Every process holds the same synchronised gradients, so all skip together.
            self.state.skipped_steps += 1
            self.stepped = False
            return
        self.callbacks.call("on_before_optimizer_step", optimizer)
        (direct or optimizer).step()
        self.callbacks.call("on_after_optimizer_step", optimizer)
        self.stepped = not self.accelerator.optimizer_step_was_skipped

    def step_scheduler(self, scheduler: LRScheduler | None = None) -> None:
        """Step ``scheduler`` (the run's by default) after a real optimizer step; per-epoch
        schedulers wait for :meth:`end_epoch`."""
        if not self.scheduler_per_epoch and self.stepped:
            self._step_scheduler(scheduler or self.scheduler)

    def end_epoch(self) -> None:
        """Step a per-epoch scheduler; called by the loop once per finished epoch."""
        if self.scheduler_per_epoch:
            self._step_scheduler(self.scheduler)

    def zero_grad(self, optimizer: Optimizer | None = None) -> None:
        """Zero the gradients of ``optimizer`` (the run's by default) once they were used."""
        if not self.accelerator.sync_gradients:
            return
        optimizer = optimizer or self.optimizer
        direct = self._direct if optimizer is self.optimizer else None
        self.callbacks.call("on_before_zero_grad", optimizer)
        (direct or optimizer).zero_grad(set_to_none=self.options.set_to_none)
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

    def step(self, loss: torch.Tensor, items: int | torch.Tensor | None = None) -> None:
        """The whole optimizer step of an ordinary training batch: ``loss`` a mean, or with
        ``items`` a sum over that many items."""
        self._window_batches += 1
        if items is not None:
            self._count(items)
        self.backward(loss)
        self.step_optimizer()
        self.step_scheduler()
        self.zero_grad()

    def _step_scheduler(self, scheduler: LRScheduler | None) -> None:
        if scheduler is None:
            return
        self.callbacks.call("on_before_scheduler_step", scheduler)
        scheduler.step()
        self.callbacks.call("on_after_scheduler_step", scheduler)

    def _count(self, items: int | torch.Tensor) -> None:
        """A batch's ``num_items``, added in place to the window's: a sum made for each batch
        would be a small block allocated amid the step and held to the window's end, beside the
        logits freed in between (see ``LossWindow``)."""
        self._window_counted = True
        if isinstance(items, torch.Tensor):
            self._window_tensors = True
            self._tensor_items.add_(scalar(items).to(self._tensor_items.device))
        else:
            self._window_numbers += items

    def _window_sum(self) -> int | torch.Tensor | None:
        """The window's items (None when its batches gave none), and a fresh window."""
        counted, numbers, tensors = (
            self._window_counted,
            self._window_numbers,
            self._window_tensors,
        )
        self._window_counted, self._window_numbers, self._window_tensors = False, 0, False
        if not tensors:
            return numbers if counted else None
        total = self._tensor_items + numbers
        self._tensor_items.zero_()
        return total

    def _rescale_window(self) -> None:
        """The window's gradients as the mean over its own batches, or over its items."""
        batches, items = self._window_batches, self._window_sum()
        self._window_batches = 0
        if batches == 0:
            return  # an ExtendedAcceleratorModule's own backward: its losses are its own
        accumulation = self.accelerator.gradient_accumulation_steps
        if items is None:
            if batches != accumulation:
                self._scale(accumulation / batches)
            return
        processes = self.accelerator.num_processes
        if processes > 1 or isinstance(items, torch.Tensor):
            items = self._window_total(items)
        if self.state.global_step == 0 and not bool(items > 0):  # one host read, at step 1
            raise _no_items(1)
        # Later, a step without items keeps the gradient its summed loss has, none, rather
        # than dividing by zero (a stream's all-padding batches, say).
        if isinstance(items, torch.Tensor):
            self._scale(processes * accumulation / items.clamp(min=1))
        else:
            self._scale(processes * accumulation / max(items, 1))

    def _window_total(self, items: int | torch.Tensor) -> torch.Tensor:
        """The window's items on every process, on the device (a sum over processes)."""
        device = self.accelerator.device
        if isinstance(items, torch.Tensor):
            count = items if items.device == device else items.to(device=device)
        else:
            count = torch.full((), items, device=device)  # filled there: no copy from the host
        if self.accelerator.num_processes == 1:
            return count
        total: torch.Tensor = self.accelerator.reduce(count.to(torch.float64), reduction="sum")
        return total

    def _scale(self, factor: float | torch.Tensor) -> None:
        grads = [p.grad for p in self._parameters if p.grad is not None]
        if not grads:
            return
        if isinstance(factor, torch.Tensor) and factor.dtype != grads[0].dtype:
            factor = factor.to(grads[0].dtype)
        torch._foreach_mul_(grads, factor)

    def _measure_grad_norm(self) -> None:
        every = self.grad_norm_every
        if every == "epoch":
            logged = self.state.is_last_training_batch
        else:
            logged = every is not None and (self.state.global_step + 1) % every == 0
        if self.clip_grad is None and self.on_nonfinite_loss != "skip" and not logged:
            return
        limit = math.inf if self.clip_grad is None else self.clip_grad
        self._grad_norm = self.accelerator.clip_grad_norm_(self.model.parameters(), limit)


def _no_items(step: int) -> StepOutputError:
    return StepOutputError(
        f"training_step returned num_items adding up to 0 over a whole optimizer step "
        f"(optimizer step {step}, every batch of its accumulation window on every process): "
        "its summed loss has no item to be the mean over; give batches with items"
    )


def direct_optimizer(optimizer: Optimizer, accelerator: Accelerator) -> Optimizer | None:
    """The torch optimizer inside Accelerate's wrapper, where the wrapper's ``step`` and
    ``zero_grad`` would only call it (no gradient scaler, no XLA, no LOMO optimizer), else
    None. Accelerate 1.16's wrapper looks up an optional package (``is_lomo_available``) twice
    and calls ``inspect.signature`` once per step; the step itself is the inner optimizer's
    either way, called only when gradients sync (the loop checks ``sync_gradients``)."""
    wrapper: Any = optimizer
    if type(wrapper) is not AcceleratedOptimizer or wrapper.scaler is not None:
        return None
    inner: Optimizer = wrapper.optimizer
    if accelerator.distributed_type == DistributedType.XLA:
        return None
    if type(inner).__module__.split(".")[0] == "lomo_optim":
        return None
    return inner
