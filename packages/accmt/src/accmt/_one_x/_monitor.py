"""accmt 1.x's Monitor flags, translated to accmt-trainer's :class:`~accmt_trainer.Monitor`."""

from __future__ import annotations

import functools
import warnings
from collections.abc import Mapping
from typing import Any

import accmt_trainer

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


class Monitor(accmt_trainer.Monitor):
    """accmt-trainer's Monitor that also takes accmt 1.x's flags: ``gpu_utilization`` and
    ``cpu_utilization`` are taken as ``memory``, and ``checkpoint`` is ignored, each with a
    DeprecationWarning. Its signature, as ``inspect`` sees it, is the 2.x one."""

    __slots__ = ()

    def __init__(self, **flags: Any) -> None:
        translated, messages = one_x_flags(flags)
        for message in messages:
            warnings.warn(message, DeprecationWarning, stacklevel=2)
        super().__init__(**translated)


# inspect shows the 2.x signature (the 1.x flags are not advertised).
functools.update_wrapper(Monitor.__init__, accmt_trainer.Monitor.__init__, assigned=())
