"""One stop agreed by every process: ``stop_worker.py OUT MODE`` (MODE ``callback`` or
``sigterm``). In one launch: an uninterrupted run; a run where rank 1 alone asks to stop after
optimizer step 5 (a callback's request_stop, or SIGTERM to its own process); and that run
resumed to its end. Each process writes OUT/<run>_rank<R>.pt: its counters, when it returned,
and its final weights."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import torch
from _toy import Classifier, blobs

from accmt_callbacks import Callback
from accmt_trainer import HyperParameters, Trainer

ASK_AT = 5


class AskOnRankOne(Callback):
    """Rank 1 alone asks to stop after optimizer step ASK_AT, in the given way."""

    def __init__(self, how: str) -> None:
        self.how, self.asked_at = how, 0.0

    def on_after_training_step(self) -> None:
        if self.trainer.accelerator.process_index != 1 or self.state.global_step != ASK_AT:
            return
        if self.asked_at:
            return
        self.asked_at = time.monotonic()
        if self.how == "sigterm":
            os.kill(os.getpid(), signal.SIGTERM)
        else:
            self.trainer.request_stop("rank 1 alone asked")


def fit(folder: Path, callbacks: list[Callback]) -> tuple[Trainer, Any]:
    hps = HyperParameters(epochs=3, batch_size=8, optimizer="AdamW", optimizer_kwargs={"lr": 0.01})
    trainer = Trainer(
        hps,
        folder,
        seed=3,
        log_with=None,
        progress_bar=False,
        cpu=True,
        checkpoint_every="epoch",
        callbacks=callbacks,
    )
    return trainer, trainer.fit(Classifier(hidden=8), blobs(64))


def record(out: Path, name: str, trainer: Trainer, state: Any, **more: Any) -> None:
    model = trainer.accelerator.unwrap_model(trainer.model)
    rank = trainer.accelerator.process_index
    weights = {key: value.detach().clone() for key, value in model.state_dict().items()}
    checkpoints = sorted(p.name for p in (trainer.model_path / "checkpoints").glob("checkpoint_*"))
    facts = {"global_step": state.global_step, "finished": state.finished, **more}
    torch.save(
        {"weights": weights, "checkpoints": checkpoints, **facts}, out / f"{name}_rank{rank}.pt"
    )


def main(out: Path, how: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    trainer, state = fit(out / "whole", [])
    record(out, "whole", trainer, state)
    asking = AskOnRankOne(how)
    trainer, state = fit(out / "stopped", [asking])
    returned = time.monotonic()
    waited = returned - asking.asked_at if asking.asked_at else None
    record(out, "stopped", trainer, state, waited=waited, reason=trainer.should_stop)
    trainer, state = fit(out / "stopped", [])
    record(out, "resumed", trainer, state)


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
