"""Runs on a `datasets` stream that keep each process's place; used by
test_datasets_streams.py.

    datasets_stream_worker.py OUT LAUNCH RUN [RUN ...]

Each RUN is ``<phase>:<variant>``, trained one after the other in this launch (numbered
LAUNCH), each into OUT/<variant>/<folder>/:

- phase ``whole`` trains uninterrupted into folder ``whole``; ``kill`` trains into folder
  ``resumed`` and SIGKILLs every process right after optimizer step 11 (checkpoint 10 is
  written by then), so it is the last run of its launch; ``resume`` trains on in ``resumed``
  from that checkpoint to the end.
- variant ``plain``: each process reads its own shards; ``workers``: the same through 2
  DataLoader workers; ``dispatch``: the main process reads and deals (``dispatch_streams``).

The stream is ``Dataset.from_dict(...).to_iterable_dataset(num_shards=8).map(tokens)``: 96
sequences, batches of 4, 12 batches per process a pass (12 rounds dispatched); 2 epochs
cut at 16 optimizer steps, a checkpoint every 5 steps. ``tokens`` appends each sample it makes
to <folder>/read_rank<R>.txt as ``<launch> <sample>``: what the stream was read for. A run
that ends writes <folder>/final_rank<R>.pt: its final weights and counters.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any

import torch
from datasets import Dataset
from stream_worker import LONGEST, VOCABULARY, TinyLM, padded

from accmt_callbacks import Callback
from accmt_trainer import HyperParameters, Trainer

RANK = os.environ.get("RANK", "0")
SAMPLES, SHARDS, KILL_AFTER = 96, 8, 11


class Tokens:
    """Sample ``x``'s token sequence, drawn from its own seed; each call noted in ``log``."""

    def __init__(self, log: Path, launch: str) -> None:
        self.log, self.launch = log, launch

    def __call__(self, example: dict[str, Any]) -> dict[str, Any]:
        index = example["x"]
        generator = torch.Generator().manual_seed(1000 + index)
        length = int(torch.randint(3, LONGEST + 1, (), generator=generator))
        ids = torch.randint(1, VOCABULARY, (length,), generator=generator)
        with self.log.open("a") as file:
            file.write(f"{self.launch} {index}\n")
        return {"ids": ids.tolist()}


def as_tensors(samples: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
    return padded(to_longest=False)([{"ids": torch.tensor(s["ids"])} for s in samples])


class KillAfter(Callback):
    """SIGKILLs this process right after optimizer step ``step``: every process does."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_after_training_step(self) -> None:
        if self.state.global_step == self.step:
            os.kill(os.getpid(), signal.SIGKILL)


def train(out: Path, launch: str, phase: str, variant: str) -> None:
    folder = out / variant / ("whole" if phase == "whole" else "resumed")
    folder.mkdir(parents=True, exist_ok=True)
    stream = (
        Dataset.from_dict({"x": list(range(SAMPLES))})
        .to_iterable_dataset(num_shards=SHARDS)
        .map(Tokens(folder / f"read_rank{RANK}.txt", launch))
    )
    hps = HyperParameters(
        epochs=2, batch_size=4, max_steps=16, optimizer="AdamW", optimizer_kwargs={"lr": 0.01}
    )
    trainer = Trainer(
        hps,
        folder / "run",
        checkpoint_every="5 steps",
        seed=5,
        log_with=None,
        progress_bar=False,
        cpu=True,
        collate_fn=as_tensors,
        dispatch_streams=variant == "dispatch",
        dataloader_num_workers=2 if variant == "workers" else 0,
        callbacks=[KillAfter(KILL_AFTER)] if phase == "kill" else [],
    )
    state = trainer.fit(TinyLM(), stream)
    model = trainer.accelerator.unwrap_model(trainer.model)
    weights = {name: value.detach().cpu() for name, value in model.state_dict().items()}
    counters = {"global_step": state.global_step, "epoch": state.epoch}
    torch.save({"weights": weights, **counters}, folder / f"final_rank{RANK}.pt")


if __name__ == "__main__":
    out, launch, *runs = sys.argv[1:]
    for run in runs:
        phase, variant = run.split(":")
        train(Path(out), launch, phase, variant)
