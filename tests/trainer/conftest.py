"""A learnable problem and a small module for the Trainer's tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import torch
from accelerate.state import AcceleratorState
from torch.utils.data import TensorDataset

from accmt_trainer import AcceleratorModule


@pytest.fixture(autouse=True)
def fresh_accelerate_state() -> Iterator[None]:
    # Accelerate keeps its state in process-wide singletons; each test's Trainer starts anew.
    yield
    AcceleratorState._reset_state(reset_partial_state=True)


def blobs(n: int, seed: int = 0, classes: int = 3) -> TensorDataset:
    """Gaussian blobs around fixed centres: learnable to near-perfect accuracy."""
    generator = torch.Generator().manual_seed(seed)
    centres = torch.tensor([[2.0, 0.0], [-2.0, 1.0], [0.0, -2.5], [1.5, 2.5]])[:classes]
    labels = torch.randint(0, classes, (n,), generator=generator)
    features = centres[labels] + 0.6 * torch.randn(n, 2, generator=generator)
    return TensorDataset(features, labels)


class Classifier(AcceleratorModule):
    def __init__(self, classes: int = 3, dropout: float = 0.0) -> None:
        torch.manual_seed(0)
        self.model = torch.nn.Sequential(
            torch.nn.Linear(2, 16),
            torch.nn.ReLU(),
            torch.nn.Dropout(dropout),
            torch.nn.Linear(16, classes),
        )
        self.loss_fn = torch.nn.CrossEntropyLoss()

    def training_step(self, batch: Any) -> torch.Tensor:
        features, labels = batch
        loss: torch.Tensor = self.loss_fn(self.model(features), labels)
        return loss

    def validation_step(self, key: str, batch: Any) -> dict[str, Any]:
        features, labels = batch
        logits = self.model(features)
        return {"loss": self.loss_fn(logits, labels), "accuracy": (logits.argmax(-1), labels)}
