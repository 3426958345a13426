"""Records every hook of a run on each process; used by tests/distributed/test_hook_order.py.

    hooks_worker.py OUT [--fail-at-step N]

Writes OUT/hooks_<mode>_rank<R>.json, mode "killed" when the run is cut off by an error at
optimizer step N, else "run".
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import TensorDataset

from accmt_callbacks import HOOKS, Callback
from accmt_metrics import Accuracy
from accmt_trainer import AcceleratorModule, HyperParameters, Trainer


def data(n: int, seed: int) -> TensorDataset:
    generator = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, 3, (n,), generator=generator)
    centres = torch.tensor([[2.0, 0.0], [-2.0, 1.0], [0.0, -2.5]])
    return TensorDataset(centres[labels] + 0.7 * torch.randn(n, 2, generator=generator), labels)


class Classifier(AcceleratorModule):
    def __init__(self) -> None:
        torch.manual_seed(0)
        self.model = torch.nn.Sequential(torch.nn.Linear(2, 16), torch.nn.ReLU(),
                                         torch.nn.Linear(16, 3))  # fmt: skip

    def training_step(self, batch: Any) -> torch.Tensor:
        return torch.nn.functional.cross_entropy(self.model(batch[0]), batch[1])

    def validation_step(self, key: str, batch: Any) -> dict[str, Any]:
        logits = self.model(batch[0])
        loss = torch.nn.functional.cross_entropy(logits, batch[1])
        return {"loss": loss, "accuracy": (logits.argmax(-1), batch[1])}


class Record(Callback):
    def __init__(self, fail_at_step: int | None) -> None:
        self.hooks: list[str] = []
        self.fail_at_step = fail_at_step

    def on_after_training_step(self) -> None:
        self.hooks.append("on_after_training_step")
        if self.state is not None and self.state.global_step == self.fail_at_step:
            raise RuntimeError("killed")


for _hook in HOOKS:
    if _hook != "on_after_training_step":
        setattr(Record, _hook, lambda self, *args, _h=_hook: self.hooks.append(_h))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--fail-at-step", type=int)
    args = parser.parse_args()
    hps = HyperParameters.from_dict({
        "epochs": 2, "batch_size": 16, "optimizer": "SGD", "optimizer_kwargs": {"lr": 0.1},
        "scheduler": "StepLR", "scheduler_kwargs": {"step_size": 1},
    })  # fmt: skip
    record = Record(args.fail_at_step)
    trainer = Trainer(
        hps, args.out / "run", evaluate_every_n_steps=3, checkpoint_every="2 steps",
        callbacks=[record], log_with=None, progress_bar=False, metrics=[Accuracy()], cpu=True,
    )  # fmt: skip
    mode = "killed" if args.fail_at_step else "run"
    try:
        trainer.fit(Classifier(), data(128, seed=1), data(32, seed=2))
    finally:
        rank = trainer.accelerator.process_index
        (args.out / f"hooks_{mode}_rank{rank}.json").write_text(json.dumps(record.hooks))


if __name__ == "__main__":
    main()
