"""A run that takes its time: ``slow_run.py FOLDER OUT``. Sleeps 0.1 s per step, checkpoints
every step, and writes its final weights to OUT (a torch file)."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import TensorDataset

from accmt_callbacks import Callback
from accmt_trainer import AcceleratorModule, HyperParameters, Trainer


class Slow(Callback):
    def on_after_training_step(self) -> None:
        time.sleep(0.1)


class Linear(AcceleratorModule):
    def __init__(self) -> None:
        torch.manual_seed(0)
        self.model = torch.nn.Linear(2, 3)

    def training_step(self, batch: Any) -> torch.Tensor:
        return torch.nn.functional.cross_entropy(self.model(batch[0]), batch[1])


def data() -> TensorDataset:
    generator = torch.Generator().manual_seed(0)
    return TensorDataset(
        torch.randn(96, 2, generator=generator), torch.randint(0, 3, (96,), generator=generator)
    )


def main() -> None:
    folder, out = Path(sys.argv[1]), Path(sys.argv[2])
    hps = HyperParameters(epochs=2, batch_size=8, optimizer="SGD", optimizer_kwargs={"lr": 0.1})
    trainer = Trainer(
        hps,
        folder,
        checkpoint_every="1 step",
        callbacks=[Slow()],
        seed=0,
        log_with=None,
        progress_bar=False,
        cpu=True,
    )
    trainer.fit(Linear(), data())
    model = trainer.accelerator.unwrap_model(trainer.model)
    torch.save({k: v.clone() for k, v in model.state_dict().items()}, out)


if __name__ == "__main__":
    main()
