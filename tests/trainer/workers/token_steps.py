"""One optimizer step over sequences of different lengths, however the batch is split.

``token_steps.py OUT.json`` (alone, or under torchrun): for each split (batch size x
accumulation) the Trainer takes one SGD step (lr 1, so the update is the gradient) on a
2-layer embedding model whose ``training_step`` returns the token cross-entropy summed over the
batch's tokens with ``num_items``; and one epoch of two steps on 12 equal samples, batch 2 x
accumulation 4 (a last window of 2 batches), with a plain mean loss. Each run's weights are
compared with a direct full-batch computation; the main process writes the largest
differences.
"""

from __future__ import annotations

import copy
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch
from accelerate.state import AcceleratorState
from torch.utils.data import TensorDataset

from accmt_trainer import AcceleratorModule, HyperParameters, Trainer

LENGTHS = [1, 12, 3, 9, 2, 7, 5, 11]  # 8 sequences, 50 tokens
VOCABULARY = 16
IGNORED = -100
TOKEN_SPLITS = [(8, 1), (4, 2), (2, 4), (1, 8)]


def sequences() -> list[tuple[torch.Tensor, torch.Tensor]]:
    generator = torch.Generator().manual_seed(0)
    return [
        (
            torch.randint(0, VOCABULARY, (n,), generator=generator),
            torch.randint(0, VOCABULARY, (n,), generator=generator),
        )
        for n in LENGTHS
    ]


def pad(samples: list[tuple[torch.Tensor, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """Pads a batch to its longest sequence; padded labels are ignored."""
    longest = max(len(ids) for ids, _ in samples)
    ids = torch.zeros(len(samples), longest, dtype=torch.long)
    labels = torch.full((len(samples), longest), IGNORED, dtype=torch.long)
    for row, (tokens, targets) in enumerate(samples):
        ids[row, : len(tokens)], labels[row, : len(targets)] = tokens, targets
    return {"input_ids": ids, "labels": labels}


def language_model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Embedding(VOCABULARY, 8), torch.nn.Tanh(), torch.nn.Linear(8, VOCABULARY)
    )


def summed_token_loss(model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    logits = model(batch["input_ids"])
    return torch.nn.functional.cross_entropy(
        logits.flatten(0, 1), batch["labels"].flatten(), ignore_index=IGNORED, reduction="sum"
    )


class TokenModule(AcceleratorModule):
    def __init__(self) -> None:
        self.model = language_model()

    def collate_fn(self, batch: list[Any]) -> Any:
        return pad(batch)

    def training_step(self, batch: dict[str, torch.Tensor]) -> dict[str, Any]:
        items = (batch["labels"] != IGNORED).sum()
        return {"loss": summed_token_loss(self.model, batch), "num_items": items}


class Regression(AcceleratorModule):
    def __init__(self) -> None:
        torch.manual_seed(0)
        self.model = torch.nn.Linear(4, 1)

    def training_step(self, batch: Any) -> torch.Tensor:
        features, targets = batch
        return torch.nn.functional.mse_loss(self.model(features), targets)


def regression_data() -> TensorDataset:
    generator = torch.Generator().manual_seed(1)
    features = torch.randn(12, 4, generator=generator)
    return TensorDataset(features, features.sum(1, keepdim=True) + 1)


def stepped(model: torch.nn.Module, loss: torch.Tensor, lr: float) -> None:
    model.zero_grad()
    loss.backward()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter -= lr * parameter.grad


def token_reference() -> torch.nn.Module:
    """One step on the mean over every token of the 8 sequences, as one batch."""
    model, batch = language_model(), pad(sequences())
    items = (batch["labels"] != IGNORED).sum()
    stepped(model, summed_token_loss(model, batch) / items, lr=1.0)
    return model


def regression_reference() -> torch.nn.Module:
    """Two steps: the mean over samples 0-7, then over samples 8-11."""
    model = Regression().model
    features, targets = regression_data().tensors
    for window in (slice(0, 8), slice(8, 12)):
        loss = torch.nn.functional.mse_loss(model(features[window]), targets[window])
        stepped(model, loss, lr=0.1)
    return model


def trained(module: AcceleratorModule, data: Any, batch: int, accumulation: int, lr: float) -> Any:
    hps = HyperParameters(epochs=1, batch_size=batch, optimizer="SGD", optimizer_kwargs={"lr": lr})
    with tempfile.TemporaryDirectory() as folder:
        trainer = Trainer(
            hps,
            folder,
            grad_accumulation_steps=accumulation,
            shuffle_train=False,
            checkpoint_every=None,
            disable_model_saving=True,
            log_with=None,
            progress_bar=False,
            cpu=True,
        )
        trainer.fit(module, data)
        model = trainer.accelerator.unwrap_model(trainer.model)
        rank = trainer.accelerator.process_index
    AcceleratorState._reset_state(reset_partial_state=True)
    return copy.deepcopy(model), rank


def largest_difference(model: torch.nn.Module, reference: torch.nn.Module) -> float:
    pairs = zip(model.state_dict().values(), reference.state_dict().values(), strict=True)
    return max(float((a - b).abs().max()) for a, b in pairs)


def run() -> tuple[dict[str, float], int]:
    """Each split's largest difference from the direct computation."""
    found, rank = {}, 0
    processes = int(__import__("os").environ.get("WORLD_SIZE", "1"))
    tokens = token_reference()
    for batch, accumulation in TOKEN_SPLITS:
        if batch * accumulation * processes != len(LENGTHS):
            batch = len(LENGTHS) // (accumulation * processes)
            if batch == 0:
                continue
        model, rank = trained(TokenModule(), sequences(), batch, accumulation, lr=1.0)
        found[f"tokens {batch}x{accumulation}"] = largest_difference(model, tokens)
    model, rank = trained(Regression(), regression_data(), 2, 4 // processes, lr=0.1)
    found[f"partial window 2x{4 // processes}"] = largest_difference(model, regression_reference())
    return found, rank


if __name__ == "__main__":
    differences, rank = run()
    if rank == 0:
        Path(sys.argv[1]).write_text(json.dumps(differences))
