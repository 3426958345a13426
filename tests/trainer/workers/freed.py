"""Runs with the cycle collector off from its first line: ``freed.py FOLDER``. Each case fits,
evaluates and predicts, then drops the Trainer and the module, and prints one JSON line: which
of the Trainer, the module and the model are still alive (none should be). The first case is
the process's first fit, with whatever torch and Accelerate import on the way."""

from __future__ import annotations

import gc

gc.disable()

import json  # noqa: E402
import sys  # noqa: E402
import weakref  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import torch  # noqa: E402
from accelerate.state import AcceleratorState  # noqa: E402
from torch.utils.data import TensorDataset  # noqa: E402

from accmt_callbacks import Callback, EarlyStopping  # noqa: E402
from accmt_metrics import Accuracy  # noqa: E402
from accmt_trainer import (  # noqa: E402
    AcceleratorModule,
    ExtendedAcceleratorModule,
    HyperParameters,
    Trainer,
)


def blobs(n: int, seed: int) -> TensorDataset:
    generator = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, 3, (n,), generator=generator)
    return TensorDataset(torch.randn(n, 2, generator=generator) + labels[:, None], labels)


class Classifier(AcceleratorModule):
    def __init__(self) -> None:
        self.model = torch.nn.Sequential(
            torch.nn.Linear(2, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3)
        )
        self.teacher = torch.nn.Linear(2, 3)

    def training_step(self, batch: Any) -> torch.Tensor:
        features, labels = batch
        return torch.nn.functional.cross_entropy(self.model(features), labels)

    def validation_step(self, key: str, batch: Any) -> dict[str, Any]:
        features, labels = batch
        logits = self.model(features)
        loss = torch.nn.functional.cross_entropy(logits, labels)
        return {"loss": loss, "accuracy": (logits.argmax(-1), labels)}

    def predict_step(self, batch: Any) -> torch.Tensor:
        return self.model(batch[0]).argmax(-1)


class Manual(ExtendedAcceleratorModule, Classifier):
    def training_step(self, batch: Any) -> torch.Tensor:
        loss = Classifier.training_step(self, batch)
        self.backward(loss)
        self.step()
        self.zero_grad()
        return loss


class Reads(Callback):
    """Reads the Trainer and the module it is bound to, keeping neither (a callback that kept
    the Trainer would make a cycle of its own through the Trainer's callbacks)."""

    def on_evaluation_end(self) -> None:
        self.seen = (type(self.trainer).__name__, type(self.module).__name__, self.state.epoch)


CASES: dict[str, tuple[type[Classifier], dict[str, Any]]] = {
    "first fit": (Classifier, {"log_with": None}),
    "tensorboard, asynchronous checkpoints": (
        Classifier,
        {"log_with": "tensorboard", "checkpoint_async": True},
    ),
    "manual steps, accumulation": (Manual, {"log_with": None, "grad_accumulation_steps": 2}),
    "bf16": (Classifier, {"log_with": None, "mixed_precision": "bf16"}),
}


def case(folder: Path, make: type[Classifier], options: dict[str, Any]) -> list[str]:
    hps = HyperParameters(epochs=2, batch_size=8, optimizer="SGD", optimizer_kwargs={"lr": 0.1})
    callbacks = [EarlyStopping(monitor="loss", patience=3), Reads()]
    trainer = Trainer(
        hps, folder, progress_bar=False, metrics=Accuracy(), callbacks=callbacks, **options
    )
    module = make()
    trainer.fit(module, blobs(32, 0), blobs(16, 1))
    trainer.evaluate(module, blobs(12, 2), weights="best_valid_loss")
    trainer.predict(module, blobs(12, 3))
    references = {"Trainer": trainer, "module": module, "model": module.model}
    weak = {name: weakref.ref(value) for name, value in references.items()}
    del trainer, module, references, callbacks
    return [name for name, reference in weak.items() if reference() is not None]


if __name__ == "__main__":
    root = Path(sys.argv[1])
    for index, (name, (make, options)) in enumerate(CASES.items()):
        AcceleratorState._reset_state(reset_partial_state=True)  # each case's own Accelerator
        alive = case(root / str(index), make, options)
        print(json.dumps({"case": name, "alive": alive}), flush=True)
