"""A language model trained on a stream without a length; used by test_streams.py.

    stream_worker.py OUT fit --split {shard,dispatch} [--kill-at-step N] [--placed]
    stream_worker.py OUT infer

``fit`` trains a tiny causal LM with token-weighted steps on a stream of token sequences of
varying lengths (an ``IterableDataset`` with no ``__len__``), with the default options and
``max_steps`` (three passes of the stream would be more), checkpointing every 4 optimizer steps
into OUT/run; ``--split`` says how the stream is split across processes (``dispatch`` pads to
one length, since dispatched batches must have one shape; ``shard`` pads each batch to its
longest). ``--kill-at-step N`` SIGKILLs the main process right after step N. A run that
completes writes OUT/final_rank<R>.pt: its final weights and counters. Every launch appends the
samples the stream gave to OUT/drawn_rank<R>.jsonl. ``--placed`` trains on a stream that keeps its
place (``state_dict``/``load_state_dict``), which a resume restores instead of reading again.

``infer`` evaluates and predicts a stream with a fixed model and writes OUT/infer_rank<R>.pt.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from resume_worker import Events, KillAtStep
from torch.utils.data import IterableDataset

from accmt_trainer import AcceleratorModule, HyperParameters, Trainer

VOCABULARY, PAD, LONGEST = 24, 0, 12
RANK = int(os.environ.get("RANK", "0"))


class TokenStream(IterableDataset[dict[str, Any]]):
    """``count`` sequences; sequence i is drawn from its own seed, so a replay gives it again."""

    def __init__(self, count: int, log: Path | None = None) -> None:
        self.count, self.log = count, log

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for index in range(self.count):
            yield self.sample(index)

    def sample(self, index: int) -> dict[str, Any]:
        generator = torch.Generator().manual_seed(1000 + index)
        length = int(torch.randint(3, LONGEST + 1, (), generator=generator))
        if self.log is not None:
            with self.log.open("a") as file:
                file.write(json.dumps(index) + "\n")
        return {"ids": torch.randint(1, VOCABULARY, (length,), generator=generator)}


class PlacedTokenStream(TokenStream):
    """The same sequences, from a stream that keeps its place: ``state_dict`` says where it
    is, ``load_state_dict`` makes its next pass start there (torchdata's protocol)."""

    def __init__(self, count: int, log: Path | None = None) -> None:
        super().__init__(count, log)
        self.position = 0

    def state_dict(self) -> dict[str, int]:
        return {"position": self.position}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.position = state["position"]

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for index in range(self.position, self.count):
            self.position = index + 1
            yield self.sample(index)
        self.position = 0


def padded(to_longest: bool) -> Any:
    def collate(samples: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        width = max(len(s["ids"]) for s in samples) if to_longest else LONGEST
        ids = torch.full((len(samples), width), PAD)
        for row, sample in enumerate(samples):
            ids[row, : len(sample["ids"])] = sample["ids"]
        return {"ids": ids}

    return collate


class TinyLM(AcceleratorModule):
    def __init__(self) -> None:
        torch.manual_seed(0)
        self.model = torch.nn.Sequential(
            torch.nn.Embedding(VOCABULARY, 16), torch.nn.Tanh(), torch.nn.Linear(16, VOCABULARY)
        )

    def _losses(self, batch: Any) -> tuple[torch.Tensor, torch.Tensor]:
        ids = batch["ids"]
        logits = self.model(ids[:, :-1])
        labels = ids[:, 1:].masked_fill(ids[:, 1:] == PAD, -100)
        loss = torch.nn.functional.cross_entropy(
            logits.flatten(0, 1), labels.flatten(), ignore_index=-100, reduction="sum"
        )
        return loss, (labels != -100).sum()

    def training_step(self, batch: Any) -> dict[str, torch.Tensor]:
        loss, items = self._losses(batch)
        return {"loss": loss, "num_items": items}

    def validation_step(self, key: str, batch: Any) -> dict[str, torch.Tensor]:
        loss, items = self._losses(batch)
        return {"loss": loss / items}

    def predict_step(self, batch: Any) -> torch.Tensor:
        return self.model(batch["ids"]).sum(dim=1)


def fit(out: Path, split: str, kill_at_step: int | None, placed: bool) -> None:
    hps = HyperParameters(
        epochs=3,
        batch_size=4,
        max_steps=14 if RANK_COUNT > 1 else 26,
        optimizer="AdamW",
        optimizer_kwargs={"lr": 0.01},
    )
    events = Events(out, 0)
    trainer = Trainer(
        hps,
        out / "run",
        checkpoint_every="4 steps",
        seed=5,
        log_with=None,
        progress_bar=False,
        cpu=True,
        collate_fn=padded(to_longest=split == "shard"),
        dispatch_streams=split == "dispatch",
        callbacks=[KillAtStep(kill_at_step, events)] if kill_at_step else [],
    )
    stream = (PlacedTokenStream if placed else TokenStream)(44, out / f"drawn_rank{RANK}.jsonl")
    state = trainer.fit(TinyLM(), stream)
    model = trainer.accelerator.unwrap_model(trainer.model)
    weights = {name: value.detach().cpu() for name, value in model.state_dict().items()}
    counters = {"global_step": state.global_step, "epoch": state.epoch}
    torch.save({"weights": weights, **counters}, out / f"final_rank{RANK}.pt")


def infer(out: Path) -> None:
    trainer = Trainer(
        HyperParameters(batch_size=3),
        out / "run",
        log_with=None,
        progress_bar=False,
        cpu=True,
        collate_fn=padded(to_longest=True),
    )
    module = TinyLM()
    results = trainer.evaluate(module, TokenStream(17))
    predictions = trainer.predict(module, TokenStream(17))
    torch.save({"results": results, "predictions": predictions}, out / f"infer_rank{RANK}.pt")


RANK_COUNT = int(os.environ.get("WORLD_SIZE", "1"))

if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("job", choices=["fit", "infer"])
    parser.add_argument("--split", choices=["shard", "dispatch"], default="shard")
    parser.add_argument("--kill-at-step", type=int)
    parser.add_argument("--placed", action="store_true", help="a stream that keeps its place")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.job == "fit":
        fit(args.out, args.split, args.kill_at_step, args.placed)
    else:
        infer(args.out)
