"""A model with tied weights (an LM head sharing its embedding's weight) trains without
Accelerate's ``Removed shared tensor ... while saving`` at every checkpoint and best model, and
its best model, which holds the tied weight once, loads back tied."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
import torch
from accelerate import Accelerator
from safetensors.torch import load_file
from torch.utils.data import TensorDataset

from accmt_trainer import AcceleratorModule, HyperParameters, Trainer, load_weights

from .test_predict import TiedHead  # an LM's shape: the output layer is the embedding's weight

NOTICE = "Removed shared tensor"


class NextToken(AcceleratorModule):
    def __init__(self) -> None:
        torch.manual_seed(0)
        self.model = TiedHead()

    def training_step(self, batch: Any) -> torch.Tensor:
        tokens, targets = batch
        return torch.nn.functional.cross_entropy(self.model(tokens), targets)

    def validation_step(self, key: str, batch: Any) -> dict[str, Any]:
        return {"loss": self.training_step(batch)}


def next_tokens(n: int, seed: int) -> TensorDataset:
    generator = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, 8, (n,), generator=generator)
    return TensorDataset(tokens, (tokens + 1) % 8)


def notices(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records if NOTICE in record.getMessage()]


@pytest.mark.parametrize("checkpoint_async", [False, True])
def test_fit_says_nothing_about_tied_weights_and_the_best_model_loads_tied(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, checkpoint_async: bool
) -> None:
    caplog.set_level(logging.WARNING)
    hps = HyperParameters(epochs=2, batch_size=16, optimizer="SGD", optimizer_kwargs={"lr": 0.5})
    trainer = Trainer(
        hps,
        tmp_path / "run",
        log_with=None,
        progress_bar=False,
        checkpoint_every="epoch",
        checkpoint_async=checkpoint_async,
    )
    module = NextToken()
    trainer.fit(module, next_tokens(64, seed=1), next_tokens(32, seed=2))
    # Two checkpoints and at least one best model were written, with nothing said about ties.
    assert len(list((tmp_path / "run" / "checkpoints").glob("checkpoint_*"))) == 2
    assert notices(caplog) == []

    best = tmp_path / "run" / "best_valid_loss"
    assert list(load_file(str(best / "model.safetensors"))) == ["embedding.weight"]  # once
    fresh = TiedHead()
    untrained = fresh.embedding.weight.detach().clone()
    load_weights(fresh, best)
    assert fresh.head.weight is fresh.embedding.weight  # still one parameter
    assert not torch.equal(fresh.embedding.weight, untrained)
    trained = load_file(str(best / "model.safetensors"))["embedding.weight"]
    assert torch.equal(fresh.head.weight, trained)

    # Accelerate still says it for a save of the program's own, outside the Trainer.
    Accelerator(cpu=True).save_model(fresh, tmp_path / "mine")
    assert len(notices(caplog)) == 1
