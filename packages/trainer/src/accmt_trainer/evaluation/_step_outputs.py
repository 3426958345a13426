"""What ``training_step`` and ``validation_step`` may return, checked where they return it.

The checks read attributes only (type, shape, ``requires_grad``): they cost no device sync.
"""

from __future__ import annotations

import inspect
from collections.abc import Collection, Mapping
from typing import Any

import attrs
import torch

from .._errors import StepOutputError, TrainerConfigError

_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
_VAR_POSITIONAL = inspect.Parameter.VAR_POSITIONAL


TrainingOutput = tuple["torch.Tensor | None", "int | torch.Tensor | None"]
"""A training step's loss, and the items it sums over (None for a mean loss)."""


def split_training_output(module: object, output: Any, *, may_be_none: bool) -> TrainingOutput:
    """``training_step``'s return: a loss (a mean), or ``{"loss": summed, "num_items": n}`` (a
    sum over ``n`` items: an int or a 0-dim tensor, read without a sync)."""
    name = f"{type(module).__name__}.training_step(batch)"
    if not isinstance(output, Mapping):
        check_training_loss(module, output, may_be_none=may_be_none)
        return output, None
    unknown = sorted(set(output) - {"loss", "num_items"})
    if "loss" not in output or unknown:
        raise StepOutputError(
            f"{name} returned a dict with keys {sorted(output)}; return the loss, or "
            '{"loss": summed_loss, "num_items": n} (a loss summed over n items)'
        )
    loss, items = output["loss"], output.get("num_items")
    check_training_loss(module, loss, may_be_none=may_be_none)
    if items is not None and not _is_count(items):
        raise StepOutputError(
            f"{name} returned num_items={items!r}; give the number of items the loss sums "
            "over, as an int or a 0-dim integer or float tensor"
        )
    return loss, items


def _is_count(items: Any) -> bool:
    if isinstance(items, torch.Tensor):
        return items.numel() == 1 and not items.is_complex() and items.dtype != torch.bool
    return isinstance(items, int) and not isinstance(items, bool) and items >= 0


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


@attrs.frozen
class ValidationCall:
    """How the Trainer calls a module's ``validation_step`` (or ``test_step``, in
    ``Trainer.evaluate``): with ``(key, batch)``."""

    module: Any
    method: str = "validation_step"

    def __call__(self, key: str, batch: Any) -> Any:
        return getattr(self.module, self.method)(key, batch)

    def where(self, key: str) -> str:
        """The call, as errors name it."""
        return f"{type(self.module).__name__}.{self.method}({key!r}, batch)"


def validation_call(
    module: object, sets: Collection[str], method: str = "validation_step"
) -> ValidationCall:
    """Checks once, at setup, that ``method`` takes ``(key, batch)``: two positional
    parameters, or ``*args``."""
    parameters = inspect.signature(getattr(module, method)).parameters.values()
    positional = [p for p in parameters if p.kind in _POSITIONAL]
    if len(positional) < 2 and not any(p.kind is _VAR_POSITIONAL for p in parameters):
        raise TrainerConfigError(
            f"{type(module).__name__}.{method} must take (key, batch): the name of the "
            f"set ({', '.join(map(repr, sorted(sets)))}) and the batch"
        )
    return ValidationCall(module, method)


@attrs.frozen
class ValidationOutput:
    """One validation batch's return, taken apart."""

    loss: torch.Tensor | None
    """The batch's loss, detached: a mean, or a sum over ``items``."""
    items: int | torch.Tensor | None
    """How many items (tokens) ``loss`` sums over; None for a mean loss."""
    arguments: dict[str, tuple[Any, ...]]
    """Each metric's ``add_batch`` arguments, by metric name."""


def split_validation_output(
    name: str, key: str, output: Any, metrics: Mapping[str, Any]
) -> ValidationOutput:
    """The loss, its items and the arguments of each metric's ``add_batch``, of one validation
    batch.

    ``name`` is the call, as errors name it. As in training, ``{"loss": summed, "num_items":
    n}`` is a loss summed over ``n`` items (tokens). A metric's value is the tuple of its
    arguments (``(predictions, references)``), or its one argument (a metric's ``add_batch``
    may take any number)."""
    if isinstance(output, torch.Tensor):
        return ValidationOutput(_validation_loss(name, output), None, {})
    if not isinstance(output, Mapping):
        raise StepOutputError(
            f"{name} returned {type(output).__name__}; return the loss tensor, or a dict "
            "such as {'loss': loss, 'accuracy': (predictions, labels)}"
        )
    loss = _validation_loss(name, output["loss"]) if "loss" in output else None
    items = _validation_items(name, output, loss)
    arguments = {}
    for metric, value in output.items():
        if metric in ("loss", "num_items"):
            continue
        if metric not in metrics:
            raise TrainerConfigError(
                f"{name} returned {metric!r}, but validation set {key!r} has no metric of that "
                f"name (its metrics: {sorted(metrics)})"
            )
        arguments[metric] = value if isinstance(value, tuple) else (value,)
        _check_arguments(name, metric, metrics[metric], arguments[metric])
    return ValidationOutput(loss, items, arguments)


def _validation_items(
    name: str, output: Mapping[str, Any], loss: torch.Tensor | None
) -> int | torch.Tensor | None:
    items = output.get("num_items")
    if items is None:
        return None
    if loss is None:
        raise StepOutputError(
            f"{name} returned num_items but no loss; return "
            '{"loss": summed_loss, "num_items": n} (a loss summed over n items)'
        )
    if not _is_count(items):
        raise StepOutputError(
            f"{name} returned num_items={items!r}; give the number of items the loss sums "
            "over, as an int or a 0-dim integer or float tensor"
        )
    return items.detach().reshape(()) if isinstance(items, torch.Tensor) else items


def _check_arguments(name: str, metric: str, instance: Any, arguments: tuple[Any, ...]) -> None:
    try:
        inspect.signature(instance.add_batch).bind(*arguments)
    except TypeError:
        taken = inspect.signature(instance.add_batch)
        raise StepOutputError(
            f"{name} returned {metric!r}: {len(arguments)} argument(s) "
            f"({', '.join(type(a).__name__ for a in arguments)}), but "
            f"{type(instance).__name__}.add_batch takes {taken}; return a tuple of its "
            "arguments, e.g. (predictions, references)"
        ) from None


def _validation_loss(name: str, loss: Any) -> torch.Tensor:
    if not isinstance(loss, torch.Tensor) or (loss.ndim != 0 and loss.numel() != 1):
        shape = f"shape {tuple(loss.shape)}" if isinstance(loss, torch.Tensor) else repr(loss)
        raise StepOutputError(
            f"{name} returned a loss of {type(loss).__name__} {shape}; expected a scalar tensor"
        )
    return loss.detach().reshape(())
