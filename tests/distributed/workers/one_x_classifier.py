"""A training script as accmt 1.x's README and tests write one, unchanged: HyperParameters with
1.x's optim_kwargs, a 1.x custom Metric overriding compute(predictions, references),
accmt.utils.set_seed, validation_step(key, batch). Run by tests/distributed/test_one_x_programs.py
through 'accmt launch'; each process writes what the run reported to <out>/rank<N>.json, with
the accuracy recomputed by hand over the whole validation set."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import TensorDataset

from accmt import AcceleratorModule, HyperParameters, Trainer
from accmt.metrics import Metric
from accmt.utils import set_seed


class Accuracy(Metric):
    def compute(self, predictions, references):  # type: ignore[no-untyped-def]
        return {"accuracy": (predictions == references).sum() / predictions.shape[0]}


class ClassificationModule(AcceleratorModule):
    def __init__(self) -> None:
        self.model = nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Linear(16, 3))

    def training_step(self, batch):  # type: ignore[no-untyped-def]
        x, y = batch
        return F.cross_entropy(self.model(x), y)

    def validation_step(self, key, batch):  # type: ignore[no-untyped-def]
        x, y = batch
        output = self.model(x)
        return {"loss": F.cross_entropy(output, y), "accuracy": (output.argmax(dim=-1), y)}


def blobs(n: int, seed: int) -> TensorDataset:
    generator = torch.Generator().manual_seed(seed)
    centres = torch.tensor([[2.0, 0.0], [-2.0, 1.0], [0.0, -2.5]])
    labels = torch.randint(0, 3, (n,), generator=generator)
    return TensorDataset(centres[labels] + torch.randn(n, 2, generator=generator), labels)


if __name__ == "__main__":
    out = Path(sys.argv[1])
    set_seed(0)
    module = ClassificationModule()
    # 203 validation samples in batches of 8: the last round on 2 processes is padded.
    train_set, val_set = blobs(160, seed=1), blobs(203, seed=2)
    trainer = Trainer(
        hps_config=HyperParameters(
            epochs=2, batch_size=8, optimizer="AdamW", optim_kwargs={"lr": 0.01}
        ),
        model_path=str(out / "model"),
        metrics=[Accuracy("accuracy")],
        log_with=None,
    )
    state = trainer.fit(module, train_set, val_set)
    features, labels = val_set.tensors
    with torch.no_grad():
        # In validation's batches of 8 (one process's order), not one forward over the 203:
        # MKL/oneDNN pick kernels by shape, and other last bits could flip a near tie. On one
        # process these are validation's logits bit for bit; on two, all but the padded last
        # round's.
        predictions = torch.cat(
            [module.model(features[i : i + 8]).argmax(dim=-1) for i in range(0, len(labels), 8)]
        )
    record = {
        "world": trainer.accelerator.num_processes,
        "rank": trainer.accelerator.process_index,
        "metrics": state.additional_metrics,
        "by_hand": float((predictions == labels).sum() / labels.shape[0]),
        "finished": state.finished,
    }
    (out / f"rank{record['rank']}.json").write_text(json.dumps(record))
