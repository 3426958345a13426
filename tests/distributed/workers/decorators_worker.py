"""Run by tests/distributed/test_decorators.py on each process of a real launch.

The functions are decorated at import, before any process group or Accelerator exists; the
group is made afterwards by the mode given on the command line. Each process writes what it
saw to <out>/rank<N>.json.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

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

ran: list[str] = []


@on_main_process
def main_only() -> str:
    ran.append("main_only")
    return "main"


@on_main_process(broadcast=True)
def main_broadcast() -> dict[str, int]:
    ran.append("main_broadcast")
    return {"from": current_process().process_index, "value": 42}


@on_last_process
def last_only() -> None:
    ran.append("last_only")


@on_last_process(broadcast=True)
def last_broadcast() -> int:
    ran.append("last_broadcast")
    return current_process().process_index * 10


@on_process(1)
def second_only() -> None:
    ran.append("second_only")


@on_process(process_index=2)
def third_only() -> None:
    ran.append("third_only")


@on_local_main_process
def local_main_only() -> None:
    ran.append("local_main_only")


@on_local_process(1)
def local_second_only() -> None:
    ran.append("local_second_only")


@on_main_process(broadcast=True)
def main_raises() -> None:
    raise KeyError("boom")


class Logger:
    """A class whose own methods are decorated in its own body."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    @on_main_process
    def log(self, line: str) -> None:
        self.lines.append(line)

    @staticmethod
    @on_last_process
    def static_last() -> None:
        ran.append("static_last")

    @classmethod
    @on_main_process
    def class_main(cls) -> None:
        ran.append(f"class_main:{cls.__name__}")


def make_group(mode: str) -> None:
    if mode == "torch":
        import torch.distributed as dist

        dist.init_process_group("gloo")
    elif mode == "accelerate":
        from accelerate import Accelerator

        Accelerator(cpu=True)
    elif mode != "env":
        raise SystemExit(f"unknown mode {mode}")


def ordering(out: Path) -> dict[str, float]:
    with main_process_first():
        entered = time.time()
        if current_process().is_main_process:
            time.sleep(0.5)
        left = time.time()
    return {"entered": entered, "left": left}


def main() -> None:
    out, mode = Path(sys.argv[1]), sys.argv[2]
    make_group(mode)
    process = current_process()
    record: dict[str, object] = {"process": process._asdict()}
    main_only()
    last_only()
    local_main_only()
    if process.num_processes > 1:
        second_only()
        local_second_only()
    if process.num_processes > 2:
        third_only()
    logger = Logger()
    logger.log("hello")
    Logger.static_last()
    Logger.class_main()
    if mode != "env":
        record["main_broadcast"] = main_broadcast()
        record["last_broadcast"] = last_broadcast()
        try:
            main_raises()
        except BaseException as error:
            # The other processes get a BroadcastError, which is also a RuntimeError.
            kind = "RuntimeError" if isinstance(error, RuntimeError) else type(error).__name__
            record["main_raises"] = f"{kind}: {error}"
        record["ordering"] = ordering(out)
        with local_main_process_first():
            record["local_first_done"] = True
        wait_for_everyone()
    else:
        try:
            wait_for_everyone()
        except Exception as error:
            record["barrier_error"] = f"{type(error).__name__}: {error}"
    record["ran"] = ran
    record["logger_lines"] = logger.lines
    (out / f"rank{process.process_index}.json").write_text(json.dumps(record))
    # A gloo group left alive at exit can abort the process as its threads are torn down.
    distributed = sys.modules.get("torch.distributed")
    if distributed is not None and distributed.is_initialized():
        distributed.barrier()
        distributed.destroy_process_group()


if __name__ == "__main__":
    main()
