"""Trainer.evaluate and Trainer.predict on however many processes torchrun starts; run by
tests/distributed/test_inference.py, once on 1, 2 and 3 processes.

    inference_worker.py OUT

Sets of 23 and 17 samples in batches of 4: their batches do not divide among 2 or 3 processes.
Each process writes what it got to OUT/rank<R>.json: the evaluation's results, the predictions
(every float as ``float.hex``, so that the test compares bits), and whether the folder form
loaded back to the same outputs.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import Dataset

from accmt_metrics import Accuracy, MeanSquaredError
from accmt_trainer import AcceleratorModule, HyperParameters, Trainer, load_predictions


class Numbered(Dataset[dict[str, torch.Tensor]]):
    """Sample i: its own index, 3 features and a class, all a function of i."""

    def __init__(self, size: int, offset: int) -> None:
        generator = torch.Generator().manual_seed(offset)
        self.x = torch.randn(size, 3, generator=generator, dtype=torch.float64)
        self.y = torch.randint(0, 4, (size,), generator=generator)
        self.offset = offset

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"index": torch.tensor(self.offset + i), "x": self.x[i], "y": self.y[i]}


class Scorer(AcceleratorModule):
    def __init__(self) -> None:
        torch.manual_seed(0)
        self.model = torch.nn.Linear(3, 4, dtype=torch.float64)

    def test_step(self, key: str, batch: dict[str, torch.Tensor]) -> dict[str, Any]:
        logits = self.model(batch["x"])
        return {
            "loss": torch.nn.functional.cross_entropy(logits, batch["y"]),
            "accuracy": (logits.argmax(-1), batch["y"]),
            "mse": (logits[:, 0], batch["x"][:, 0]),
        }

    def predict_step(self, batch: dict[str, torch.Tensor]) -> Any:
        logits = self.model(batch["x"])
        # A ragged part: sample i keeps its first 1 + i % 3 features.
        ragged = [x[: 1 + int(i) % 3] for i, x in zip(batch["index"], batch["x"], strict=True)]
        return {"index": batch["index"], "out": (logits, ragged)}


def as_bits(predictions: Any) -> dict[str, Any]:
    logits, ragged = predictions["out"]
    return {
        "index": predictions["index"].tolist(),
        "logits": [[float(v).hex() for v in row] for row in logits.tolist()],
        "ragged": [[float(v).hex() for v in row.tolist()] for row in ragged],
    }


def main(out: Path) -> None:
    hps = HyperParameters.from_dict({"epochs": 1, "batch_size": 4})
    metrics = [Accuracy(), MeanSquaredError(name="mse")]
    trainer = Trainer(
        hps, out / "run", metrics=metrics, log_with=None, progress_bar=False, cpu=True
    )
    module = Scorer()
    sets = {"a": Numbered(23, 0), "b": Numbered(17, 100)}
    results = trainer.evaluate(module, sets)
    predictions = trainer.predict(module, sets["a"])
    folder = trainer.predict(module, sets["a"], output_dir=out / "predictions", max_shard_size=300)
    loaded = load_predictions(folder)
    record = {
        "results": {key: {k: float(v).hex() for k, v in r.items()} for key, r in results.items()},
        "predictions": as_bits(predictions),
        "loaded_equal": as_bits(loaded) == as_bits(predictions),
        "shards": len(list(Path(folder).glob("*.safetensors"))),
        "group_after": torch.distributed.is_initialized(),
        "world": int(os.environ.get("WORLD_SIZE", "1")),
    }
    rank = int(os.environ.get("RANK", "0"))
    (out / f"rank{rank}.json").write_text(json.dumps(record))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
