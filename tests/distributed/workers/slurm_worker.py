"""Run by tests/distributed/test_slurm.py as ``srun --ntasks=2 python slurm_worker.py OUT``
would run it: two plain processes, no launcher, only SLURM's variables. Each process:

1. reads its place from SLURM's variables alone, without importing torch;
2. joins the job as accmt-search does before its first trial (Accelerate's state made before
   any Trainer), sends the main process's rank to both, and leaves it (the group and
   Accelerate's state torn down, the environment as it started);
3. trains a Trainer, whose Accelerator forms the 2-process job from them (its group torn down
   when the fit ends: the fit made it);
4. goes back to the environment it started with (as a fresh task would see it), and enters
   ``main_process_first``, whose barrier forms the job again from SLURM's variables.

Training and the ordered block are process_first_worker.py's.

Each writes what it saw to OUT/rank<R>.json."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from process_first_worker import prepare, train

from accmt_decorators import current_process

TORCH_NAMES = ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK")
THREADS = ("LOCAL_WORLD_SIZE", "OMP_NUM_THREADS")


def search_link(started_with: dict[str, str]) -> list[int]:
    """The processes accmt-search's link to the job counts, and the rank it broadcasts from
    the main process; then back to a process with no group and no Accelerate state."""
    import torch.distributed
    from accelerate.state import AcceleratorState

    from accmt_search._processes import ProcessLink

    link = ProcessLink.start(None)
    seen = [link.num_processes, link.broadcast(current_process().process_index)]
    torch.distributed.destroy_process_group()
    AcceleratorState._reset_state(reset_partial_state=True)
    os.environ.clear()
    os.environ.update(started_with)
    return seen


def main(out: Path) -> None:
    started_with = dict(os.environ)
    record: dict[str, object] = {"process": current_process()._asdict()}
    record["torch_before"] = "torch" in sys.modules
    record["search_link"] = search_link(started_with)
    record.update(train(out))
    distributed = sys.modules["torch.distributed"]
    record["group_left"] = distributed.is_initialized()
    record["threads"] = sys.modules["torch"].get_num_threads()
    record["exported"] = {
        name: os.environ[name] for name in (*TORCH_NAMES, *THREADS) if name not in started_with
    }
    os.environ.clear()
    os.environ.update(started_with)
    record.update(prepare(out))  # main_process_first, its barrier forming the job again
    record["process_after_barrier"] = current_process()._asdict()
    record["world_after_barrier"] = distributed.get_world_size()
    rank = record["process"]["process_index"]  # type: ignore[index]
    (out / f"rank{rank}.json").write_text(json.dumps(record))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
