"""Fit's own validation over 101 samples, with lr 0 so that the weights stay as made:
``fit_validation_worker.py OUT.json``. The main process writes what fit recorded (each set's
loss and metrics) and what Trainer.evaluate gives on the same set, to compare across numbers of
processes."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import _toy as toy
import torch
from _toy import blobs

from accmt_metrics import Accuracy, MeanSquaredError
from accmt_trainer import HyperParameters, Trainer


class Classifier(toy.Classifier):
    def validation_step(self, key: str, batch: Any) -> dict[str, Any]:
        features, labels = batch
        logits = self.model(features)
        probability = logits.softmax(-1)[:, 0]
        return {
            "loss": torch.nn.functional.cross_entropy(logits, labels),
            "accuracy": (logits.argmax(-1), labels),
            "mse": (probability, (labels == 0).float()),
        }


def main(out: Path) -> None:
    hps = HyperParameters(epochs=1, batch_size=8, optimizer="SGD", optimizer_kwargs={"lr": 0.0})
    metrics = [Accuracy(), MeanSquaredError()]
    with tempfile.TemporaryDirectory() as folder:
        trainer = Trainer(
            hps,
            folder,
            metrics=metrics,
            log_with=None,
            progress_bar=False,
            cpu=True,
            checkpoint_every=None,
            disable_model_saving=True,
        )
        sets = {"validation": blobs(101, 1), "small": blobs(5, 2)}
        module = Classifier()
        state = trainer.fit(module, blobs(48, 0), sets)
        evaluated = trainer.evaluate(module, sets)
        if trainer.accelerator.is_main_process:
            record = {"fit": state.additional_metrics, "evaluate": evaluated}
            out.write_text(json.dumps(record))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
