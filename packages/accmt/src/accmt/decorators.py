"""accmt 1.x's ``accmt.decorators`` (now from accmt-decorators, decided at call time)."""

from accmt_decorators import (
    current_process,
    local_main_process_first,
    main_process_first,
    on_last_process,
    on_local_main_process,
    on_local_process,
    on_main_process,
    on_process,
    wait_for_everyone,
)

__all__ = [
    "current_process",
    "local_main_process_first",
    "main_process_first",
    "on_last_process",
    "on_local_main_process",
    "on_local_process",
    "on_main_process",
    "on_process",
    "wait_for_everyone",
]
