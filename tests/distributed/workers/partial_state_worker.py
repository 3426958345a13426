"""A program that makes Accelerate's state before the Trainer: ``partial_state_worker.py OUT
MODE``. ``plain``: ``PartialState()`` (on a CPU machine it says one process while torchrun's
group has two), then ``fit``; ``cpu``: ``PartialState(cpu=True)``, then ``fit``. Each process
writes what happened to OUT/rank<R>.json."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import torch
from _toy import Classifier
from accelerate import PartialState
from torch.utils.data import TensorDataset

from accmt_trainer import HyperParameters, Trainer, TrainerConfigError


def main(out: Path, mode: str) -> None:
    PartialState(cpu=True) if mode == "cpu" else PartialState()
    generator = torch.Generator().manual_seed(0)
    data = TensorDataset(torch.randn(32, 2, generator=generator), torch.randint(0, 3, (32,)))
    hps = HyperParameters(epochs=1, batch_size=8, optimizer="SGD", optimizer_kwargs={"lr": 0.1})
    folder = out / "run"
    record: dict[str, Any] = {"rank": int(os.environ["RANK"])}
    try:
        trainer = Trainer(hps, folder, log_with=None, progress_bar=False)
        module = Classifier(hidden=None)
        state = trainer.fit(module, data)
        record.update(steps=state.global_step, processes=trainer.accelerator.num_processes)
        # After fit the module holds the user's own model, not DDP's wrapper.
        record.update(model=type(module.model).__name__)
    except TrainerConfigError as error:
        record.update(error=str(error), written=folder.exists())
    (out / f"rank{record['rank']}.json").write_text(json.dumps(record))


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
