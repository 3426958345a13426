"""``seed_everything`` before the module is built, with ``Trainer(seed=...)``, reproduces a run
whose module makes its weights in ``__init__``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from accmt_trainer import AcceleratorModule, HyperParameters, Trainer, seed_everything

from .conftest import blobs


class Unseeded(AcceleratorModule):
    """Builds its weights from whatever the global RNG holds."""

    def __init__(self) -> None:
        self.model = torch.nn.Sequential(
            torch.nn.Linear(2, 16), torch.nn.ReLU(), torch.nn.Dropout(0.3), torch.nn.Linear(16, 3)
        )

    def training_step(self, batch: Any) -> torch.Tensor:
        return torch.nn.functional.cross_entropy(self.model(batch[0]), batch[1])


def train(folder: Path, seed: int | None) -> dict[str, torch.Tensor]:
    if seed is not None:
        seed_everything(seed)
    module = Unseeded()
    trainer = Trainer(
        HyperParameters(epochs=2, batch_size=8, optimizer_kwargs={"lr": 0.1}),
        folder,
        seed=seed if seed is not None else 0,
        log_with=None,
        progress_bar=False,
        checkpoint_every=None,
    )
    trainer.fit(module, blobs(32))
    return {
        k: v.clone()
        for k, v in trainer.accelerator.unwrap_model(trainer.model).state_dict().items()
    }


def same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return all(torch.equal(a[k], b[k]) for k in a)


def test_seed_everything_reproduces_a_module_built_in_init(tmp_path: Path) -> None:
    first, second = train(tmp_path / "a", 5), train(tmp_path / "b", 5)
    assert same(first, second)
    torch.manual_seed(123)
    unseeded = train(tmp_path / "c", None)
    assert not same(first, unseeded)
