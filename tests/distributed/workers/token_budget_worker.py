"""Runs batched by token budget, uninterrupted and killed; used by test_token_budget.py.

    token_budget_worker.py OUT --kill-at-step N    the uninterrupted run into OUT/full, then
                                                   the run into OUT/killed, SIGKILLed right
                                                   after optimizer step N
    token_budget_worker.py OUT                     OUT/killed resumed to its end

Trains a tiny sequence classifier (embeddings, dropout, a mean over the tokens) with accmt's
Trainer and a ``TokenBudgetBatchSampler`` as its ``batch_sampler``, checkpointing every 5
optimizer steps. Each training step appends the batch's epoch, step, sample indices and padded
token count to <run>/batches_rank<R>.jsonl; a run that completes writes its final weights to
<run>/final_rank<R>.pt, and the sampler's batches per epoch to <run>/plan.json.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

import torch

# The modules next to this one; run as a script, this folder is on the path.
from _sequences import VOCABULARY, Sequences, pad
from resume_worker import Events, KillAtStep

from accmt_trainer import AcceleratorModule, HyperParameters, TokenBudgetBatchSampler, Trainer

MAX_TOKENS = 40


def lengths() -> list[int]:
    return torch.randint(1, 17, (60,), generator=torch.Generator().manual_seed(5)).tolist()


class MeanOfTokens(torch.nn.Module):
    """Embeddings, dropout, their mean over the sample's own tokens, a linear head."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(VOCABULARY, 16, padding_idx=0)
        self.drop = torch.nn.Dropout(0.2)
        self.head = torch.nn.Linear(16, 2)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        mask = (ids > 0).unsqueeze(-1).float()
        logits: torch.Tensor = self.head((self.drop(self.embed(ids)) * mask).sum(1) / mask.sum(1))
        return logits


class Classifier(AcceleratorModule):
    def __init__(self, log: Path) -> None:
        torch.manual_seed(0)
        self.model = MeanOfTokens()
        self.log = log

    def training_step(self, batch: Any) -> torch.Tensor:
        ids = batch["input_ids"]
        record = {
            "epoch": self.state.epoch,
            "step": self.state.global_step,
            "indices": batch["index"].tolist(),
            "tokens": ids.numel(),
        }
        with self.log.open("a") as file:
            file.write(json.dumps(record) + "\n")
        return torch.nn.functional.cross_entropy(self.model(ids), batch["label"])


def train(out: Path, kill_at_step: int | None) -> None:
    out.mkdir(parents=True, exist_ok=True)
    rank = int(os.environ.get("RANK", "0"))
    hps = HyperParameters.from_dict(
        {"epochs": 2, "batch_size": 1, "optimizer": "AdamW", "optimizer_kwargs": {"lr": 0.01}}
    )
    sampler = TokenBudgetBatchSampler(lengths(), MAX_TOKENS, seed=4)
    events = Events(out, 0)
    trainer = Trainer(
        hps,
        out / "run",
        batch_sampler=sampler,
        collate_fn=pad,
        checkpoint_every="5 steps",
        seed=11,
        log_with=None,
        progress_bar=False,
        cpu=True,
        callbacks=[KillAtStep(kill_at_step, events)] if kill_at_step else [],
    )
    trainer.fit(Classifier(out / f"batches_rank{rank}.jsonl"), Sequences(lengths()))
    model = trainer.accelerator.unwrap_model(trainer.model)
    weights = {name: value.detach().cpu() for name, value in model.state_dict().items()}
    torch.save({"weights": weights}, out / f"final_rank{rank}.pt")
    if rank == 0:
        (out / "plan.json").write_text(json.dumps({"batches": len(sampler)}))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--kill-at-step", type=int)
    args = parser.parse_args()
    if args.kill_at_step is not None:
        train(args.out / "full", None)
    train(args.out / "killed", args.kill_at_step)


if __name__ == "__main__":
    main()
