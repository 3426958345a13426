"""Trainer.fit leaves the process group as it found it; run by
tests/distributed/test_process_group.py.

    process_group_worker.py OUT twice   fit 1 epoch, fit again to 2 epochs in the same folder,
                                        then gather each process's rank
    process_group_worker.py OUT mine    make the group first, fit, then use the group
    process_group_worker.py OUT many    fit 16 runs one after the other, each making and
                                        destroying the job's group

Each process writes what it saw to OUT/rank<R>.json.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import torch
import torch.distributed
from _toy import Classifier, blobs
from accelerate import Accelerator

from accmt_trainer import HyperParameters, Trainer


def fit(folder: Path, epochs: int) -> dict[str, Any]:
    """One fit of 4 optimizer steps an epoch on 2 processes (64 samples, 8 per process)."""
    hps = HyperParameters.from_dict(
        {"epochs": epochs, "batch_size": 8, "optimizer": "SGD", "optimizer_kwargs": {"lr": 0.1}}
    )
    trainer = Trainer(
        hps, folder, checkpoint_every="epoch", seed=0, log_with=None, progress_bar=False, cpu=True
    )
    state = trainer.fit(Classifier(hidden=None), blobs(64))
    return {
        "epoch": state.epoch,
        "global_step": state.global_step,
        "finished": state.finished,
        # The Trainer's Accelerator still answers after fit.
        "world": trainer.accelerator.num_processes,
        "rank": trainer.accelerator.process_index,
        "group_after_fit": torch.distributed.is_initialized(),
    }


def twice(out: Path) -> dict[str, Any]:
    first = fit(out / "run", epochs=1)
    second = fit(out / "run", epochs=2)
    rank = first["rank"]
    # The script goes on with Accelerate, which makes a group again.
    accelerator = Accelerator(cpu=True)
    ranks = accelerator.gather(torch.tensor([rank])).tolist()
    accelerator.end_training()
    return {"first": first, "second": second, "rank": rank, "gathered": ranks}


def mine(out: Path) -> dict[str, Any]:
    torch.distributed.init_process_group("gloo")
    world = torch.distributed.group.WORLD
    ran = fit(out / "run", epochs=1)
    rank = torch.distributed.get_rank()
    ranks = [torch.zeros(1, dtype=torch.long) for _ in range(2)]
    torch.distributed.all_gather(ranks, torch.tensor([rank]))
    same = torch.distributed.group.WORLD is world
    torch.distributed.destroy_process_group()
    gathered = [int(value) for value in ranks]
    return {"fit": ran, "rank": rank, "gathered": gathered, "same_group": same}


def many(out: Path) -> dict[str, Any]:
    runs = [fit(out / f"run{index}", epochs=1) for index in range(16)]
    return {"runs": runs, "rank": runs[0]["rank"]}


def main() -> None:
    out, mode = Path(sys.argv[1]), sys.argv[2]
    record = {"twice": twice, "mine": mine, "many": many}[mode](out)
    (out / f"rank{record['rank']}.json").write_text(json.dumps(record))


if __name__ == "__main__":
    main()
