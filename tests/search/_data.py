"""Small digit-classification problems for the search tests (scikit-learn ships the data)."""

from __future__ import annotations

from typing import Any

import optuna
import torch
from sklearn.datasets import load_digits
from torch.utils.data import TensorDataset

from accmt_trainer import AcceleratorModule


def digits(train: int = 400, valid: int = 120) -> tuple[TensorDataset, TensorDataset]:
    """The first ``train`` + ``valid`` digits after a fixed shuffle, scaled to [0, 1]."""
    images, labels = load_digits(return_X_y=True)
    order = torch.randperm(len(labels), generator=torch.Generator().manual_seed(0))
    features = torch.tensor(images, dtype=torch.float32)[order] / 16.0
    targets = torch.tensor(labels, dtype=torch.long)[order]
    return (
        TensorDataset(features[:train], targets[:train]),
        TensorDataset(features[train : train + valid], targets[train : train + valid]),
    )


class DigitsMLP(AcceleratorModule):
    """A one-hidden-layer classifier; ``hidden`` and ``dropout`` are searchable arguments."""

    def __init__(self, hidden: int = 32, dropout: float = 0.0) -> None:
        self.hidden, self.dropout = hidden, dropout
        self.model = torch.nn.Sequential(
            torch.nn.Linear(64, hidden),
            torch.nn.ReLU(),
            torch.nn.Dropout(dropout),
            torch.nn.Linear(hidden, 10),
        )

    def training_step(self, batch: Any) -> torch.Tensor:
        images, labels = batch
        return torch.nn.functional.cross_entropy(self.model(images), labels)

    def validation_step(self, key: str, batch: Any) -> dict[str, Any]:
        images, labels = batch
        logits = self.model(images)
        loss = torch.nn.functional.cross_entropy(logits, labels)
        return {"loss": loss, "accuracy": (logits.argmax(dim=-1), labels)}


class PruneTrial(optuna.pruners.BasePruner):
    """Prunes one trial, by number, at its first evaluation."""

    def __init__(self, number: int) -> None:
        self.number = number

    def prune(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> bool:
        return trial.number == self.number
