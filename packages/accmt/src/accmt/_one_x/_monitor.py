"""accmt 1.x's Monitor flags, for accmt-trainer's :class:`~accmt_trainer.Monitor`."""

from __future__ import annotations

import functools
import warnings
from collections.abc import Mapping
from typing import Any

import accmt_trainer

# accmt 1.x's Monitor flags that have no effect in accmt 2. The others are accmt-trainer's own
# (gpu_utilization and cpu_utilization included).
DROPPED_FLAGS = ("checkpoint",)


def one_x_flags(flags: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``flags`` without the 1.x flags accmt 2 dropped, and one warning message per such flag."""
    kept = {name: value for name, value in flags.items() if name not in DROPPED_FLAGS}
    messages = [
        f"Monitor({name}=...) has no effect in accmt 2; remove it"
        for name in flags
        if name in DROPPED_FLAGS
    ]
    return kept, messages


class Monitor(accmt_trainer.Monitor):
    """accmt-trainer's Monitor that also takes accmt 1.x's ``checkpoint`` flag, which it
    ignores with a DeprecationWarning. Its signature, as ``inspect`` sees it, is the 2.x one."""

    __slots__ = ()

    def __init__(self, **flags: Any) -> None:
        kept, messages = one_x_flags(flags)
        for message in messages:
            warnings.warn(message, DeprecationWarning, stacklevel=2)
        super().__init__(**kept)


# inspect shows the 2.x signature (the 1.x flags are not advertised).
functools.update_wrapper(Monitor.__init__, accmt_trainer.Monitor.__init__, assigned=())
