"""A run that rank 1 kills, and that the launcher restarts; run by
tests/distributed/test_elastic.py under ``accmt launch --max-restarts``.

    elastic_worker.py OUT [--kill-at STEP ...] [--reference]

Trains 2 epochs of 12 optimizer steps, checkpointing every 2 steps into OUT/run. On the launch's
attempt ``i`` (torchelastic's TORCHELASTIC_RESTART_COUNT), rank 1 SIGKILLs itself right after
optimizer step ``STEP[i]``, when there is one. The restarted group resumes by itself from the
newest checkpoint. A run that completes writes each process's final weights and state to
OUT/final_rank<R>.pt and the number of starts it took to OUT/attempts_rank<R>.txt.
``--reference`` first trains the same run, never killed, into OUT/reference (on a restart it
finds it finished), writing OUT/reference_rank<R>.pt: one launch gives both.
"""

from __future__ import annotations

import argparse
import os
import signal
from pathlib import Path

import torch
from _toy import Classifier, clusters

from accmt_callbacks import Callback
from accmt_trainer import HyperParameters, Trainer


class KillAt(Callback):
    """Rank 1 dies right after optimizer step ``step``."""

    def __init__(self, step: int | None) -> None:
        self.step = step

    def on_after_training_step(self) -> None:
        accelerator = self.trainer.accelerator
        if self.state.global_step == self.step and accelerator.process_index == 1:
            os.kill(os.getpid(), signal.SIGKILL)


def train(folder: Path, result: Path, kill: int | None) -> int:
    """Train (or resume) the run in ``folder``; write its weights and state to ``result``,
    with this process's rank in the name. Returns the rank."""
    hps = HyperParameters.from_dict(
        {"epochs": 2, "batch_size": 8, "optimizer": "AdamW", "optimizer_kwargs": {"lr": 0.01}}
    )
    trainer = Trainer(
        hps,
        folder,
        checkpoint_every="2 steps",
        seed=3,
        log_with=None,
        progress_bar=False,
        callbacks=[KillAt(kill)],
    )
    state = trainer.fit(Classifier(activation=torch.nn.ReLU, dropout=0.2), clusters(192, seed=1))
    model = trainer.accelerator.unwrap_model(trainer.model)
    weights = {name: value.detach().cpu() for name, value in model.state_dict().items()}
    rank = trainer.accelerator.process_index
    record = {"weights": weights, "state": state.to_dict()}
    torch.save(record, result.with_name(f"{result.name}_rank{rank}.pt"))
    return rank


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--kill-at", type=int, nargs="*", default=[])
    parser.add_argument("--reference", action="store_true")
    args = parser.parse_args()
    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    if args.reference:
        train(args.out / "reference", args.out / "reference", kill=None)
    kill = args.kill_at[attempt] if attempt < len(args.kill_at) else None
    rank = train(args.out / "run", args.out / "final", kill)
    (args.out / f"attempts_rank{rank}.txt").write_text(str(attempt + 1))


if __name__ == "__main__":
    main()
