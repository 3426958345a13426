"""An ExtendedAcceleratorModule's own steps, through the running fit's optimizer step."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch
    from torch.optim import Optimizer
    from torch.optim.lr_scheduler import LRScheduler

    from ._fit import Fit
    from ._optimizer_step import OptimizerStep


class ManualSteps:
    """The Trainer's public steps, which an ExtendedAcceleratorModule calls from its
    ``training_step``: one owner (the run's optimizer step) decides, for both kinds of module,
    whether the optimizer stepped."""

    latest_fit: Fit | None

    def backward(self, loss: torch.Tensor) -> None:
        """Backward through Accelerate (scales the loss for accumulation and mixed precision)."""
        self._stepper().backward(loss)

    def step_optimizer(self, optimizer: Optimizer | None = None) -> None:
        """Clip if asked, then step ``optimizer`` (the run's by default) at a window's end."""
        self._stepper().step_optimizer(optimizer)

    def step_scheduler(self, scheduler: LRScheduler | None = None) -> None:
        """Step ``scheduler`` (the run's by default) when the optimizer stepped."""
        self._stepper().step_scheduler(scheduler)

    def zero_grad(self, optimizer: Optimizer | None = None) -> None:
        """Zero the gradients of ``optimizer`` (the run's by default) once they were used."""
        self._stepper().zero_grad(optimizer)

    def _stepper(self) -> OptimizerStep:
        loop = None if self.latest_fit is None else self.latest_fit.loop
        if loop is None:
            raise RuntimeError("the optimizer step exists only while Trainer.fit runs")
        return loop.owners.optimizer_step
