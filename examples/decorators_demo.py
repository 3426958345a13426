"""accmt-decorators on its own: run code on the right processes of a distributed job.

    python -m torch.distributed.run --standalone --nproc_per_node 2 examples/decorators_demo.py

The functions are decorated at import, before any process group exists; which process runs
them is decided when they are called. Needs only accmt-decorators; when torch is installed,
a gloo process group is made so that broadcasting and barriers work too.
"""

from __future__ import annotations

import os
from typing import Any

from accmt_decorators import (
    current_process,
    main_process_first,
    on_last_process,
    on_main_process,
    on_process,
    wait_for_everyone,
)


@on_main_process
def announce(message: str) -> None:
    print(f"[main process] {message}", flush=True)


@on_last_process
def report_last() -> None:
    print(f"[last process] I am process {current_process().process_index}", flush=True)


@on_process(1)
def second_process_only() -> None:
    print("[process 1] only I run this", flush=True)


@on_main_process(broadcast=True)
def choose_run_name() -> str:
    return f"run-{os.getpid()}"


def make_group() -> Any:
    """torch.distributed with a gloo group made, or None on one process or without torch."""
    if current_process().num_processes == 1:
        return None
    try:
        import torch.distributed as dist
    except ImportError:
        return None
    dist.init_process_group("gloo")
    return dist


def main() -> None:
    dist = make_group()
    process = current_process()
    announce(f"{process.num_processes} process(es), identity from {process.source}")
    if process.num_processes > 1:
        second_process_only()
    report_last()
    if dist is not None:
        with main_process_first():
            # The main process prepares (downloads, caches) before the others read.
            print(f"[process {process.process_index}] preparing data", flush=True)
        name = choose_run_name()
        print(
            f"[process {process.process_index}] run name from the main process: {name}", flush=True
        )
        wait_for_everyone()
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
