"""accmt 1.x's HyperParameters constructor, on accmt-trainer's
:class:`~accmt_trainer.HyperParameters`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
from torch.optim import Optimizer
from torch.optim.lr_scheduler import LRScheduler

import accmt_trainer

_OPTIONAL = ("optimizer_kwargs", "scheduler_kwargs", "optim", "optim_kwargs")


class HyperParameters(accmt_trainer.HyperParameters):
    """accmt-trainer's HyperParameters that also takes accmt 1.9.5.1's constructor: ``optim``
    for ``optimizer``, ``optim_kwargs`` for ``optimizer_kwargs``, and an optimizer or scheduler
    given as a mapping with its name under ``"type"`` (``optimizer={"type": "AdamW", "lr":
    1e-3}``), read as :meth:`from_dict` reads a configuration file."""

    __slots__ = ()

    def __init__(
        self,
        epochs: int = 1,
        max_steps: int | None = None,
        batch_size: int | tuple[int, int] | list[int] = 1,
        optimizer: str | type[Optimizer] | Mapping[str, Any] = "SGD",
        optimizer_kwargs: Mapping[str, Any] | None = None,
        scheduler: str | type[LRScheduler] | Mapping[str, Any] | None = None,
        scheduler_kwargs: Mapping[str, Any] | None = None,
        step_scheduler_per_epoch: bool = False,
        *,
        optim: str | type[Optimizer] | Mapping[str, Any] | None = None,
        optim_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        given: dict[str, Any] = {
            "epochs": epochs,
            "max_steps": max_steps,
            "batch_size": batch_size,
            "optimizer": optimizer,
            "optimizer_kwargs": optimizer_kwargs,
            "scheduler": scheduler,
            "scheduler_kwargs": scheduler_kwargs,
            "step_scheduler_per_epoch": step_scheduler_per_epoch,
            "optim": optim,
            "optim_kwargs": optim_kwargs,
        }
        # None means "not given" for the kwargs and for optim; so does the default optimizer
        # when optim names one.
        if optim is not None and isinstance(optimizer, str) and optimizer == "SGD":
            del given["optimizer"]
        given = {k: v for k, v in given.items() if not (k in _OPTIONAL and v is None)}
        # The configuration file's reader takes every 1.x spelling, and names the key given.
        read = accmt_trainer.HyperParameters.from_dict(given)
        super().__init__(**attrs.asdict(read, recurse=False))
