"""What the Trainer logs to its trackers."""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import attrs

_Class = TypeVar("_Class", bound=type)

# accmt 1.x's Monitor flags that accmt 2 spells otherwise; None: it has no effect any more.
ONE_X_FLAGS: dict[str, str | None] = {
    "gpu_utilization": "memory",
    "cpu_utilization": "memory",
    "checkpoint": None,
}


def one_x_flags(flags: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``flags`` with accmt 1.x's names translated (several 1.x flags for one 2.x flag: any
    of them turns it on), and one warning message per 1.x name."""
    translated = {name: value for name, value in flags.items() if name not in ONE_X_FLAGS}
    messages = []
    for name, value in flags.items():
        if name not in ONE_X_FLAGS:
            continue
        new = ONE_X_FLAGS[name]
        if new is None:
            messages.append(f"Monitor({name}=...) has no effect in accmt 2; remove it")
            continue
        messages.append(f"Monitor({name}=...) is accmt 1.x's spelling: use Monitor({new}=...)")
        translated[new] = bool(translated.get(new, False)) or bool(value)
    return translated, messages


def _accepts_1x_flags(cls: _Class) -> _Class:
    """Let the class's ``__init__`` take accmt 1.x's flag names too, each with one
    DeprecationWarning pointing at the caller's line; its own signature stays the one seen."""
    init: Callable[..., None] = getattr(cls, "__init__")  # noqa: B009

    @functools.wraps(init)
    def __init__(self: Any, **flags: Any) -> None:
        translated, messages = one_x_flags(flags)
        for message in messages:
            warnings.warn(message, DeprecationWarning, stacklevel=2)
        init(self, **translated)

    setattr(cls, "__init__", __init__)  # noqa: B010  (mypy keeps the typed __init__)
    return cls


@_accepts_1x_flags
@attrs.frozen(kw_only=True)
class Monitor:
    """Choose what is logged, and under which names.

    Each flag is read on logging steps only (every ``log_every`` optimizer steps, and after each
    evaluation), so what is off costs nothing, and what is on costs one host sync per log.
    accmt 1.x's ``gpu_utilization`` and ``cpu_utilization`` are taken as ``memory``, and its
    ``checkpoint`` is ignored, each with a DeprecationWarning.
    """

    train_loss: bool = True
    """``train/loss``: mean training loss since the last log, averaged over processes."""
    validation_loss: bool = True
    """``<set>/loss``: the validation loss of each validation set."""
    additional_metrics: bool = True
    """``<set>/<metric>``: each metric of each validation set."""
    epoch: bool = True
    """``train/epoch``: the epoch, as a fraction (1.5 is half-way through the second)."""
    learning_rate: bool = False
    """``train/lr``: the learning rate of the optimizer's first parameter group."""
    grad_norm: bool = False
    """``train/grad_norm``: the gradient norm before clipping, on the logged optimizer step."""
    throughput: bool = False
    """``train/samples_per_second``: samples of all processes per second since the last log."""
    memory: bool = False
    """``train/memory_gib``: peak accelerator memory of this process (CUDA), else RSS."""
