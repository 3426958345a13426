"""A training script written for accmt 1.x, unchanged: a 1.x YAML-layout dict of
hyperparameters, 1.x's Trainer options (log_every=-1, callback=, sampler_val=, collate_fn_train=
and collate_fn_val=, gradient_checkpointing, set_to_none, consolidate_metrics, module hooks,
max_shard_size, a monitor dict...), one 1.x metric of one argument given alone, validation_step
(self, batch), Monitor's 1.x flags and trainer.log_artifact. Run by
tests/distributed/test_one_x_programs.py through 'accmt launch'; each process writes what it
saw to <out>/rank<N>.json."""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F
from one_x_classifier import blobs  # this folder's other 1.x program
from torch.utils.data import Sampler

from accmt import AcceleratorModule, Callback, Monitor, Trainer
from accmt.metrics import Metric
from accmt.utils import set_seed


class Accuracy(Metric):
    def compute(self, correct):  # type: ignore[no-untyped-def]
        return {"accuracy": correct.float().mean()}


class Checkpointed(nn.Sequential):
    def __init__(self) -> None:
        super().__init__(nn.Linear(2, 16), nn.ReLU(), nn.Linear(16, 3))
        self.checkpointing = None

    def gradient_checkpointing_enable(self, gradient_checkpointing_kwargs=None):  # type: ignore[no-untyped-def]
        self.checkpointing = gradient_checkpointing_kwargs


class ClassificationModule(AcceleratorModule):
    def __init__(self) -> None:
        self.model = Checkpointed()
        self.hooks = {"before": 0, "after": 0}

    def training_step(self, batch):  # type: ignore[no-untyped-def]
        return F.cross_entropy(self.model(batch["x"]), batch["y"])

    def validation_step(self, batch):  # type: ignore[no-untyped-def]
        x, y, tag = batch
        assert tag == "val"
        output = self.model(x)
        return {"loss": F.cross_entropy(output, y), "accuracy": output.argmax(dim=-1) == y}

    def before_eval(self):  # type: ignore[no-untyped-def]
        self.hooks["before"] += 1

    def after_eval(self):  # type: ignore[no-untyped-def]
        self.hooks["after"] += 1


class FirstOf(Sampler[int]):
    def __init__(self, count: int) -> None:
        self.count = count

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(range(self.count))

    def __len__(self) -> int:
        return self.count


def collate_train(samples):  # type: ignore[no-untyped-def]
    return {"x": torch.stack([s[0] for s in samples]), "y": torch.stack([s[1] for s in samples])}


def collate_val(samples):  # type: ignore[no-untyped-def]
    return torch.stack([s[0] for s in samples]), torch.stack([s[1] for s in samples]), "val"


class LogsArtifact(Callback):
    def __init__(self, path: Path) -> None:
        self.path = path

    def on_fit_end(self):  # type: ignore[no-untyped-def]
        self.trainer.log_artifact(self.path)


if __name__ == "__main__":
    out = Path(sys.argv[1])
    set_seed(0)
    notes = out / "notes.txt"
    notes.write_text("notes")
    module = ClassificationModule()
    # Validation on the first 101 of 203 samples, in batches of 8: padded on 2 processes.
    train_set, val_set = blobs(160, seed=1), blobs(203, seed=2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        monitor = Monitor(learning_rate=True, gpu_utilization=True)
        trainer = Trainer(
            {"hps": {"epochs": 2, "batch_size": 8, "optimizer": {"type": "AdamW", "lr": 0.01}}},
            str(out / "model"),
            "one-x",  # track_name, positionally as 1.x allowed
            log_with="tensorboard",
            log_every=-1,
            enable_checkpointing=True,
            multiple_checkpoints=False,
            gradient_checkpointing=True,
            gradient_checkpointing_kwargs={"use_reentrant": False},
            set_to_none=False,
            sampler_val=FirstOf(101),
            collate_fn_train=collate_train,
            collate_fn_val=collate_val,
            max_shard_size=200,
            metrics=Accuracy("accuracy"),
            consolidate_metrics={"avg_accuracy": lambda key: key.startswith("accuracy")},
            cleanup_cache_every_n_steps=3,
            reset_optimizer_every_n_steps=7,
            additional_tracker_config={"dataset": "blobs"},
            callback=LogsArtifact(notes),
            monitor=monitor,
            safe_mode=True,
        )
    logged: list[dict[str, float]] = []
    log = trainer.log
    trainer.log = lambda values, step=None: (logged.append(dict(values)), log(values, step))  # type: ignore[method-assign]
    state = trainer.fit(module, train_set, val_set)
    features, labels = val_set.tensors
    with torch.no_grad():
        # In validation's batches of 8 (see one_x_classifier.py): validation's logits bit for
        # bit on one process, all but the padded last round's on two.
        predictions = torch.cat(
            [module.model(features[i : min(i + 8, 101)]).argmax(dim=-1) for i in range(0, 101, 8)]
        )
    rank = trainer.accelerator.process_index
    record = {
        "world": trainer.accelerator.num_processes,
        "rank": rank,
        "finished": state.finished,
        "metrics": state.additional_metrics,
        "by_hand": float((predictions == labels[:101]).float().mean()),
        "warnings": sorted(
            {str(w.message).split("=")[0] for w in caught if w.category is DeprecationWarning}
        ),
        "train_losses_logged": sum("train/loss" in values for values in logged),
        "avg_accuracy": [values["avg_accuracy"] for values in logged if "avg_accuracy" in values],
        "hidden": [key for values in logged for key in values if key == "validation/accuracy"],
        "hooks": module.hooks,
        "checkpointing": trainer.accelerator.unwrap_model(module.model).checkpointing,
        "checkpoints": sorted(p.name for p in (out / "model" / "checkpoints").glob("checkpoint_*")),
        "best_model": sorted(p.name for p in (out / "model" / "best_valid_loss").iterdir()),
        "artifact": (out / "model" / "logs" / "one-x" / "artifacts" / "notes.txt").is_file(),
    }
    (out / f"rank{rank}.json").write_text(json.dumps(record))
