"""Run by tests/distributed/test_cli_launch.py through ``accmt launch``: each process writes
who it is, and what the job around it is, to <out>/rank<N>.json. Like a training script, it
says nothing about CPUs or process counts: the launcher decides."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import torch
from accelerate import Accelerator


def main() -> None:
    out, *rest = sys.argv[1:]
    if rest == ["--fail"]:
        raise SystemExit(3)
    state = Accelerator().state
    # One collective: the processes are one job, not separate single-process runs.
    total = torch.tensor([float(state.process_index + 1)])
    if state.num_processes > 1:
        torch.distributed.all_reduce(total)
    record = {
        "world": state.num_processes,
        "rank": state.process_index,
        "backend": state.backend,
        "device": str(state.device),
        "sum_of_ranks_plus_one": total.item(),
        "args": rest,
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
    }
    (Path(out) / f"rank{state.process_index}.json").write_text(json.dumps(record))
    if state.num_processes > 1:
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
