"""Trains one small model with Trainer.fit; run by tests/distributed/test_trainer.py.

    worker.py OUT BATCH_SIZE ACCUMULATION...

On N processes each gets BATCH_SIZE samples per batch; the single-process reference is the same
script with N x BATCH_SIZE. One run per ACCUMULATION, in turn, in the same launch; each process
saves its final weights to OUT/accumulation_<ACCUMULATION>/rank<R>.pt.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from _toy import Classifier, clusters

from accmt_trainer import HyperParameters, Trainer


def main() -> None:
    out, batch_size = Path(sys.argv[1]), int(sys.argv[2])
    for accumulation in map(int, sys.argv[3:]):
        train(out / f"accumulation_{accumulation}", batch_size, accumulation)


def train(out: Path, batch_size: int, accumulation: int) -> None:
    hps = HyperParameters.from_dict(
        {
            "epochs": 2,
            "batch_size": batch_size,
            "optimizer": "SGD",
            "optimizer_kwargs": {"lr": 0.1, "momentum": 0.9},
            "scheduler": "LinearWithWarmup",
            "scheduler_kwargs": {"num_warmup_steps": 2},
        }
    )
    trainer = Trainer(
        hps,
        out / "run",
        grad_accumulation_steps=accumulation,
        seed=0,
        log_with=None,
        progress_bar=False,
        cpu=True,
    )
    state = trainer.fit(Classifier(), clusters(192, spread=0.6))
    weights = {
        k: v.detach().cpu()
        for k, v in trainer.accelerator.unwrap_model(trainer.model).state_dict().items()
    }
    rank = trainer.accelerator.process_index
    torch.save({"weights": weights, "global_step": state.global_step}, out / f"rank{rank}.pt")


if __name__ == "__main__":
    main()
