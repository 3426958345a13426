"""What ``training_step`` and ``validation_step`` may return, checked where they return it.

The checks read attributes only (type, shape, ``requires_grad``): they cost no device sync.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from ._errors import StepOutputError, TrainerConfigError


def check_training_loss(module: object, loss: Any, *, may_be_none: bool) -> None:
    """A scalar tensor attached to the graph (or None, from a module that steps itself)."""
    name = f"{type(module).__name__}.training_step(batch)"
    if loss is None:
        if may_be_none:
            return
        raise StepOutputError(
            f"{name} returned None; return the loss tensor, e.g. `return loss`, and the Trainer "
            "does backward and the optimizer step"
        )
    if not isinstance(loss, torch.Tensor):
        raise StepOutputError(
            f"{name} returned {type(loss).__name__} {loss!r}; return the loss as a tensor of "
            "the graph (not `loss.item()` or a Python number), so that backward can run"
        )
    if loss.ndim != 0 and loss.numel() != 1:
        raise StepOutputError(
            f"{name} returned a tensor of shape {tuple(loss.shape)}; return a scalar loss, "
            "e.g. `loss.mean()` over the batch"
        )
    if not loss.requires_grad and not may_be_none and torch.is_grad_enabled():
        raise StepOutputError(
            f"{name} returned a tensor with no graph (requires_grad=False); compute it from "
            "the model's output without `.detach()`, `torch.no_grad()` or `.data`"
        )


def split_validation_output(
    module: object, key: str, output: Any, metric_names: Any
) -> tuple[torch.Tensor | None, dict[str, tuple[Any, Any]]]:
    """The loss and the ``(predictions, references)`` per metric of one validation batch."""
    name = f"{type(module).__name__}.validation_step({key!r}, batch)"
    if isinstance(output, torch.Tensor):
        return _validation_loss(name, output), {}
    if not isinstance(output, Mapping):
        raise StepOutputError(
            f"{name} returned {type(output).__name__}; return the loss tensor, or a dict "
            "such as {'loss': loss, 'accuracy': (predictions, labels)}"
        )
    loss = _validation_loss(name, output["loss"]) if "loss" in output else None
    pairs = {}
    for metric, value in output.items():
        if metric == "loss":
            continue
        if metric not in metric_names:
            raise TrainerConfigError(
                f"{name} returned {metric!r}, but validation set {key!r} has no metric of that "
                f"name (its metrics: {sorted(metric_names)})"
            )
        if not (isinstance(value, (tuple, list)) and len(value) == 2):
            raise StepOutputError(
                f"{name} returned {metric!r}: {type(value).__name__}; expected a pair "
                "(predictions, references)"
            )
        pairs[metric] = (value[0], value[1])
    return loss, pairs


def _validation_loss(name: str, loss: Any) -> torch.Tensor:
    if not isinstance(loss, torch.Tensor) or (loss.ndim != 0 and loss.numel() != 1):
        shape = f"shape {tuple(loss.shape)}" if isinstance(loss, torch.Tensor) else repr(loss)
        raise StepOutputError(
            f"{name} returned a loss of {type(loss).__name__} {shape}; expected a scalar tensor"
        )
    return loss.detach().reshape(())
