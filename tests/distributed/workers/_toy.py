"""The toy task the distributed workers train: points of the plane in 3 classes, and a small
classifier of them.

The workers are scripts that a launcher (torchrun, ``accelerate launch``) runs as files, with
their own folder first on ``sys.path``: they import this module by its bare name, ``from _toy
import Classifier, blobs``. Each worker's data and weights are what it drew before this module
was shared, draw for draw: the distributed tests compare runs bit for bit.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils.data import TensorDataset

from accmt_trainer import AcceleratorModule

CENTRES = torch.tensor([[2.0, 0.0], [-2.0, 1.0], [0.0, -2.5]])


def blobs(n: int, seed: int = 0) -> TensorDataset:
    """``n`` points in 3 classes, class ``c`` a standard normal cloud around ``(c, c)``: the
    classes overlap."""
    generator = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, 3, (n,), generator=generator)
    return TensorDataset(torch.randn(n, 2, generator=generator) + labels[:, None], labels)


def clusters(n: int, seed: int = 0, spread: float = 0.7) -> TensorDataset:
    """``n`` points in 3 classes, each a normal cloud of standard deviation ``spread`` around
    its own of CENTRES: the classes stand well apart."""
    generator = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, 3, (n,), generator=generator)
    return TensorDataset(CENTRES[labels] + spread * torch.randn(n, 2, generator=generator), labels)


class Classifier(AcceleratorModule):
    """Logits for the 3 classes of a point, trained with cross-entropy; its weights are drawn
    from seed 0. ``hidden=None``: one linear layer; otherwise a linear layer to ``hidden``
    features, ``activation``, dropout of ``dropout`` where given, and a linear layer to the
    classes."""

    def __init__(
        self,
        hidden: int | None = 16,
        activation: type[torch.nn.Module] = torch.nn.Tanh,
        dropout: float | None = None,
    ) -> None:
        torch.manual_seed(0)
        if hidden is None:
            self.model: torch.nn.Module = torch.nn.Linear(2, 3)
            return
        layers = [torch.nn.Linear(2, hidden), activation()]
        if dropout is not None:
            layers.append(torch.nn.Dropout(dropout))
        self.model = torch.nn.Sequential(*layers, torch.nn.Linear(hidden, 3))

    def training_step(self, batch: Any) -> torch.Tensor:
        return torch.nn.functional.cross_entropy(self.model(batch[0]), batch[1])
