"""A masked-LM run that can be killed and resumed; used by test_collators_resume.py.

    collators_resume_worker.py OUT --workers W [--kill-at-step N]

Trains a tiny masked language model with accmt's Trainer and accmt-collators'
DataCollatorForLanguageModeling (seeded only through the Trainer's seed=), on token sequences
of varying lengths, checkpointing every 5 optimizer steps into OUT/run. Each training step
appends, for each sample of its batch, the sample's index, the epoch, and the masked inputs and
labels of its own tokens to OUT/masks_rank<R>.jsonl. ``--kill-at-step N`` SIGKILLs the main
process right after step N. A run that completes writes its final weights to
OUT/final_rank<R>.pt.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

import torch

# The worker next to this one; run as a script, this folder is on the path.
from resume_worker import Events, KillAtStep

from accmt_collators import DataCollatorForLanguageModeling
from accmt_trainer import AcceleratorModule, HyperParameters, Trainer

VOCABULARY = 40
PAD, CLS, SEP, MASK = 0, 1, 2, 3


class TinyTokenizer:
    """All a masking collator reads from a tokenizer."""

    pad_token_id = PAD
    mask_token_id = MASK
    padding_side = "right"
    all_special_ids = (PAD, CLS, SEP, MASK)

    def __len__(self) -> int:
        return VOCABULARY


def sentences(count: int) -> list[dict[str, Any]]:
    generator = torch.Generator().manual_seed(3)
    samples = []
    for index in range(count):
        length = int(torch.randint(4, 18, (), generator=generator))
        words = torch.randint(4, VOCABULARY, (length,), generator=generator).tolist()
        samples.append({"input_ids": [CLS, *words, SEP], "index": index})
    return samples


class MaskedLM(AcceleratorModule):
    def __init__(self, log: Path) -> None:
        torch.manual_seed(0)
        self.model = torch.nn.Sequential(
            torch.nn.Embedding(VOCABULARY, 16),
            torch.nn.Linear(16, 16),
            torch.nn.GELU(),
            torch.nn.Dropout(0.1),
            torch.nn.Linear(16, VOCABULARY),
        )
        self.log = log

    def training_step(self, batch: Any) -> torch.Tensor:
        self._record(batch)
        logits = self.model(batch["input_ids"])
        return torch.nn.functional.cross_entropy(logits.flatten(0, 1), batch["labels"].flatten())

    def _record(self, batch: Any) -> None:
        lines = []
        for row, index in enumerate(batch["index"].tolist()):
            real = batch["attention_mask"][row].bool()
            lines.append(
                json.dumps(
                    {
                        "epoch": self.state.epoch,
                        "index": index,
                        "input_ids": batch["input_ids"][row][real].tolist(),
                        "labels": batch["labels"][row][real].tolist(),
                    }
                )
            )
        with self.log.open("a") as file:
            file.write("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--kill-at-step", type=int)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    hps = HyperParameters.from_dict(
        {"epochs": 2, "batch_size": 8, "optimizer": "AdamW", "optimizer_kwargs": {"lr": 0.01}}
    )
    trainer = Trainer(
        hps,
        args.out / "run",
        checkpoint_every="5 steps",
        seed=11,
        log_with=None,
        progress_bar=False,
        cpu=True,
        dataloader_num_workers=args.workers,
        collate_fn=DataCollatorForLanguageModeling(TinyTokenizer(), mlm_probability=0.3),
        callbacks=[KillAtStep(args.kill_at_step, Events(args.out, 0))] if args.kill_at_step else [],
    )
    rank = int(os.environ.get("RANK", "0"))
    trainer.fit(MaskedLM(args.out / f"masks_rank{rank}.jsonl"), sentences(96), None)
    model = trainer.accelerator.unwrap_model(trainer.model)
    weights = {name: value.detach().cpu() for name, value in model.state_dict().items()}
    torch.save({"weights": weights}, args.out / f"final_rank{rank}.pt")


if __name__ == "__main__":
    main()
