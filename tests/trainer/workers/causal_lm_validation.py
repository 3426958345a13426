"""A tiny GPT-2's validation, token-weighted: ``causal_lm_validation.py OUT.json`` (alone, or
under torchrun). ``validation_step`` returns the loss summed over the batch's tokens with
``num_items``, and ``Perplexity(causal=True)`` gets the logits and labels as the model takes
them. ``fit`` (lr 0, so the weights stay as made) and ``Trainer.evaluate`` run over the padded
sequences of ``tests/trainer/_tiny_gpt2.py``; the main process writes what each recorded, and
the token-weighted loss computed by hand in one forward over every sequence.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch

from accmt_metrics import Perplexity
from accmt_trainer import AcceleratorModule, HyperParameters, Trainer

sys.path.insert(0, str(Path(__file__).parents[3]))  # the repository, for `tests` under torchrun
from tests.trainer._tiny_gpt2 import (
    IGNORED,
    batched,
    padded_sequences,
    tiny_gpt2,
    token_weighted_loss,
)


class CausalLM(AcceleratorModule):
    """``summed``: the validation loss summed over tokens with ``num_items``; else each
    batch's mean over its own tokens (a mean of batch means over the set)."""

    def __init__(self, summed: bool = True) -> None:
        self.model = tiny_gpt2()
        self.summed = summed

    def training_step(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        loss: torch.Tensor = self.model(**batch).loss
        return loss

    def validation_step(self, key: str, batch: dict[str, torch.Tensor]) -> dict[str, Any]:
        labels = batch["labels"]
        logits = self.model(
            input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]
        ).logits
        targets = labels[:, 1:]
        summed = torch.nn.functional.cross_entropy(
            logits[:, :-1].flatten(0, 1), targets.flatten(), ignore_index=IGNORED, reduction="sum"
        )
        tokens = (targets != IGNORED).sum()
        loss = {"loss": summed, "num_items": tokens} if self.summed else {"loss": summed / tokens}
        return {**loss, "perplexity": (logits, labels)}


def by_hand() -> float:
    """The token-weighted loss over every sequence, in one forward of the same weights."""
    model = tiny_gpt2().eval()
    batch = batched(padded_sequences())
    with torch.no_grad():
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    return token_weighted_loss(logits, batch["labels"])


def run(summed: bool = True) -> tuple[dict[str, Any], bool]:
    """What fit's validation and Trainer.evaluate recorded, and whether this is the main
    process."""
    hps = HyperParameters(
        epochs=1, batch_size=(4, 3), optimizer="SGD", optimizer_kwargs={"lr": 0.0}
    )
    sequences = padded_sequences()
    with tempfile.TemporaryDirectory() as folder:
        trainer = Trainer(
            hps,
            folder,
            metrics=[Perplexity(causal=True)],
            log_with=None,
            progress_bar=False,
            cpu=True,
            checkpoint_every=None,
            disable_model_saving=True,
        )
        module = CausalLM(summed)
        state = trainer.fit(module, sequences, sequences)
        evaluated = trainer.evaluate(module, sequences)
        main = trainer.accelerator.is_main_process
    record = {"fit": state.additional_metrics["validation"], "evaluate": evaluated}
    return record, main


if __name__ == "__main__":
    found, main = run()
    if main:
        Path(sys.argv[1]).write_text(json.dumps({**found, "by_hand": by_hand()}))
