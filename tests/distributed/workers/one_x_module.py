"""A training script as accmt 1.x's docs write one, unchanged, for what the classifier program
leaves out: an ExtendedAcceleratorModule stepping by hand (self.step), calling the module,
len(module), pad, freeze / unfreeze, validation_step(self, batch) with one validation set,
MetricParallel and MetricBatch, accmt.utils' helpers, a 1.x state.json read through
accmt.states, and a deliberately dropped name (the global accelerator). Run by
tests/distributed/test_one_x_programs.py through 'accmt launch': ``one_x_module.py OUT
STATE_JSON``; each process writes what it saw to <out>/rank<N>.json, with the metrics recomputed
by hand over the whole validation set."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import TensorDataset

from accmt import ExtendedAcceleratorModule, HyperParameters, Trainer
from accmt.metrics import MetricBatch, MetricParallel
from accmt.states import TrainingState
from accmt.utils import combine_dicts, get_seed, set_seed


class Accuracy(MetricParallel):
    def compute(self, predictions, references):  # type: ignore[no-untyped-def]
        return {"accuracy": (predictions == references).sum() / predictions.shape[0]}


class BatchError(MetricBatch):
    def compute(self, predictions, references):  # type: ignore[no-untyped-def]
        return {"batch_error": (predictions != references).float().mean()}


class SteppedModule(ExtendedAcceleratorModule):
    def __init__(self) -> None:
        self.encoder = nn.Linear(2, 16)
        self.model = nn.Sequential(self.encoder, nn.ReLU(), nn.Linear(16, 3))
        self.freeze(self.encoder)  # the first epoch trains the head only

    def forward(self, x):  # type: ignore[no-untyped-def]
        return self.model(x)

    def training_step(self, batch):  # type: ignore[no-untyped-def]
        x, y = batch
        # pad, as 1.x's helper: the batch's labels padded to 16 with -100, which the loss skips.
        labels = self.pad(y, -100, max_length=16)
        logits = self(x)
        logits = torch.cat([logits, logits.new_zeros(16 - len(x), 3)]) if len(x) < 16 else logits
        loss = F.cross_entropy(logits, labels, ignore_index=-100)
        self.backward(loss)
        self.step()
        self.zero_grad()
        return loss

    def validation_step(self, batch):  # type: ignore[no-untyped-def]
        x, y = batch
        output = self(x)
        predictions = output.argmax(dim=-1)
        return {
            "loss": F.cross_entropy(output, y),
            "accuracy": (predictions, y),
            "batch_error": (predictions, y),
        }


def blobs(n: int, seed: int) -> TensorDataset:
    generator = torch.Generator().manual_seed(seed)
    centres = torch.tensor([[2.0, 0.0], [-2.0, 1.0], [0.0, -2.5]])
    labels = torch.randint(0, 3, (n,), generator=generator)
    return TensorDataset(centres[labels] + torch.randn(n, 2, generator=generator), labels)


def dropped_name() -> str:
    try:
        from accmt import accelerator  # noqa: F401
    except ImportError as error:
        return str(error)
    return "imported"


if __name__ == "__main__":
    out, one_x_state = Path(sys.argv[1]), Path(sys.argv[2])
    set_seed(0)
    module = SteppedModule()
    frozen_size = sum(p.numel() for p in module.model.parameters() if p.requires_grad)
    module.unfreeze(module.encoder)
    # 203 validation samples in batches of 16: the last round on 2 processes is padded.
    train_set, val_set = blobs(160, seed=1), blobs(203, seed=2)
    trainer = Trainer(
        hps_config=HyperParameters(
            epochs=3, batch_size=16, optimizer="AdamW", optim_kwargs={"lr": 0.02}
        ),
        model_path=str(out / "model"),
        metrics=[Accuracy("accuracy"), BatchError("batch_error")],
        log_with=None,
    )
    state = trainer.fit(module, train_set, val_set)
    features, labels = val_set.tensors
    with torch.no_grad():
        # In validation's batches of 16 (see one_x_classifier.py): validation's logits bit for
        # bit on one process, all but the padded last round's on two.
        predictions = torch.cat(
            [module(features[i : i + 16]).argmax(dim=-1) for i in range(0, len(labels), 16)]
        )
    hits = predictions == labels
    batches = [(~hits[i : i + 16]).float().mean() for i in range(0, len(labels), 16)]
    record = {
        "world": trainer.accelerator.num_processes,
        "rank": trainer.accelerator.process_index,
        "metrics": state.additional_metrics,
        "accuracy_by_hand": float(hits.sum() / labels.shape[0]),
        "batch_error_by_hand": float(torch.stack(batches).mean()),
        "finished": state.finished,
        "global_step": state.global_step,
        "len": len(module),
        "trainable_while_frozen": frozen_size,
        "seed": get_seed(),
        "combined": combine_dicts({"a": 1}, {"a": 2}),
        "one_x_best_valid_loss": TrainingState.load(one_x_state).best_valid_loss,
        "dropped": dropped_name(),
    }
    (out / f"rank{record['rank']}.json").write_text(json.dumps(record))
