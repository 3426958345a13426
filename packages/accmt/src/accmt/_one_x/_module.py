"""accmt 1.x's AcceleratorModule: accmt-trainer's, with 1.x's helpers and its
``validation_step(self, batch)``.

A 1.x module calls itself (:meth:`AcceleratorModule.forward`), counts its parameters with
``len(module)`` and pads with :meth:`AcceleratorModule.pad`. Its ``validation_step`` may take
the batch alone: the class then gets a ``validation_step(key, batch)`` that accmt-trainer
calls, which drops the key; :func:`check_one_set` refuses such a module with several
validation sets.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable
from typing import Any, Literal

import torch

import accmt_trainer
from accmt_trainer import TrainerConfigError

_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


class AcceleratorModule(accmt_trainer.AcceleratorModule):
    """accmt-trainer's :class:`~accmt_trainer.AcceleratorModule`, plus accmt 1.x's helpers:
    calling the module runs :meth:`forward` (the model, by default), ``len(module)`` is the
    model's number of parameters, and :meth:`pad`. With one validation set,
    ``validation_step(self, batch)`` may leave out the set's key."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get("validation_step")
        if own is not None and takes_the_batch_alone(own):
            cls.validation_step = _with_a_key(own)  # type: ignore[method-assign]

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """Run the model: ``self.model(*args, **kwargs)``. Override to change the flow."""
        return self.model(*args, **kwargs)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """``module(...)`` is :meth:`forward`."""
        return self.forward(*args, **kwargs)

    def __len__(self) -> int:
        """The number of parameters of ``self.model``, trainable or frozen."""
        return sum(parameter.numel() for parameter in self.model.parameters())

    def pad(
        self,
        tensor: torch.Tensor | list[torch.Tensor] | tuple[torch.Tensor, ...],
        value: float,
        padding: Literal["max_length", "longest"] | None = None,
        max_length: int | None = None,
        side: Literal["left", "right"] = "right",
        op: str | Callable[[Any], Any] | None = None,
    ) -> Any:
        """Pad the last dimension of a tensor, or of each tensor of a list or tuple, with
        ``value``, on the ``side`` given.

        A single tensor (or a list or tuple of one) is padded to ``max_length``, which it then
        needs. Several tensors are padded to the longest of them (``padding="longest"``, the
        default) or to ``max_length`` (``padding="max_length"``), and come back as a list or
        tuple like the one given, or as ``op`` of it: ``"stack"``, ``"cat"`` (the torch
        function) or any callable. Padding never truncates: a tensor longer than the target is
        an error.
        """
        if side not in ("left", "right"):
            raise ValueError(f"pad(side=...): expected 'left' or 'right', got {side!r}")
        if isinstance(tensor, torch.Tensor) or len(tensor) == 1:
            single = tensor if isinstance(tensor, torch.Tensor) else tensor[0]
            if max_length is None:
                raise ValueError("pad: a single tensor is padded to max_length, which is missing")
            single = single.reshape(1) if single.ndim == 0 else single
            padded = [_pad_to(single, max_length, value, side)]
        else:
            if (padding or "longest") == "max_length":
                if max_length is None:
                    raise ValueError("pad(padding='max_length') needs max_length")
                target = max_length
            else:
                target = max(item.size(-1) for item in tensor)
            padded = [_pad_to(item, target, value, side) for item in tensor]
        if isinstance(tensor, torch.Tensor):
            return padded[0]
        together = tuple(padded) if isinstance(tensor, tuple) else padded
        if op is None:
            return together
        return getattr(torch, op)(together) if isinstance(op, str) else op(together)

    @classmethod
    def from_hf(
        cls, path: str | os.PathLike[str], type: str | Any | None = None, **kwargs: Any
    ) -> AcceleratorModule:
        """:meth:`accmt_trainer.AcceleratorModule.from_hf`, as a module with 1.x's helpers."""
        return _PretrainedModule(accmt_trainer.AcceleratorModule.from_hf(path, type, **kwargs))


class ExtendedAcceleratorModule(accmt_trainer.ExtendedAcceleratorModule, AcceleratorModule):
    """accmt-trainer's :class:`~accmt_trainer.ExtendedAcceleratorModule` with accmt 1.x's
    helpers of :class:`AcceleratorModule`."""


def check_one_set(module: object, sets: list[str]) -> None:
    """Refuse a module whose ``validation_step`` takes the batch alone with several sets."""
    step = getattr(type(module), "validation_step", None)
    if len(sets) > 1 and getattr(step, "_batch_alone", False):
        raise TrainerConfigError(
            f"{type(module).__name__}.validation_step(batch) takes no key, but there are "
            f"{len(sets)} validation sets {sorted(sets)}: define validation_step(self, key, batch)"
        )


def takes_the_batch_alone(step: Callable[..., Any], bound: bool = False) -> bool:
    """Whether the step ``function(self, batch)`` (``method(batch)`` when ``bound``) takes
    the batch alone, without the set's key."""
    parameters = list(inspect.signature(step).parameters.values())[0 if bound else 1 :]
    positional = [p for p in parameters if p.kind in _POSITIONAL]
    variable = any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in parameters)
    return len(positional) == 1 and not variable


def _with_a_key(step: Callable[..., Any]) -> Callable[..., Any]:
    def validation_step(self: Any, key: str, batch: Any) -> Any:
        return step(self, batch)

    validation_step.__doc__ = step.__doc__
    validation_step._batch_alone = True  # type: ignore[attr-defined]
    return validation_step


def _pad_to(tensor: torch.Tensor, length: int, value: float, side: str) -> torch.Tensor:
    missing = length - tensor.size(-1)
    if missing < 0:
        raise ValueError(
            f"pad: a tensor of length {tensor.size(-1)} is longer than {length}; pad does not "
            "truncate"
        )
    widths = (0, missing) if side == "right" else (missing, 0)
    return torch.nn.functional.pad(tensor, widths, mode="constant", value=value)


# Made after the helpers above: defining a subclass runs __init_subclass__.
class _PretrainedModule(AcceleratorModule):
    """What :meth:`AcceleratorModule.from_hf` returns: accmt-trainer's module, with 1.x's
    helpers."""

    def __init__(self, pretrained: accmt_trainer.AcceleratorModule) -> None:
        self.model = pretrained.model
        self._pretrained = pretrained

    def training_step(self, batch: Any) -> torch.Tensor:
        return self._pretrained.training_step(batch)

    def validation_step(self, key: str, batch: Any) -> torch.Tensor | dict[str, Any]:
        return self._pretrained.validation_step(key, batch)
