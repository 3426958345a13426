"""Records every hook of a run on each process; used by tests/distributed/test_hook_order.py.

    hooks_worker.py OUT... [--kill-at-step N]

Trains one run into each OUT in turn, appending each hook's name, as it fires, to
OUT/hooks_<mode>_rank<R>.txt: mode "killed" for the last OUT's run when each process kills itself
with SIGKILL after its optimizer step N (nothing after it runs, no hook, no handler), else "run".
"""

from __future__ import annotations

import argparse
import os
import signal
from pathlib import Path
from typing import Any

import _toy as toy
import torch
from _toy import clusters

from accmt_callbacks import HOOKS, Callback
from accmt_metrics import Accuracy
from accmt_trainer import HyperParameters, Trainer


class Classifier(toy.Classifier):
    def __init__(self) -> None:
        super().__init__(activation=torch.nn.ReLU)

    def validation_step(self, key: str, batch: Any) -> dict[str, Any]:
        logits = self.model(batch[0])
        loss = torch.nn.functional.cross_entropy(logits, batch[1])
        return {"loss": loss, "accuracy": (logits.argmax(-1), batch[1])}


class Record(Callback):
    def __init__(self, path: Path, kill_at_step: int | None) -> None:
        self.path = path
        self.kill_at_step = kill_at_step

    def note(self, hook: str) -> None:
        # Written through at once: a SIGKILL leaves no chance to write later.
        with self.path.open("a") as file:
            file.write(hook + "\n")

    def on_after_training_step(self) -> None:
        self.note("on_after_training_step")
        if self.state is not None and self.state.global_step == self.kill_at_step:
            os.kill(os.getpid(), signal.SIGKILL)


for _hook in HOOKS:
    if _hook != "on_after_training_step":
        setattr(Record, _hook, lambda self, *args, _h=_hook: self.note(_h))


def train(out: Path, kill_at_step: int | None) -> None:
    hps = HyperParameters.from_dict(
        {
            "epochs": 2,
            "batch_size": 16,
            "optimizer": "SGD",
            "optimizer_kwargs": {"lr": 0.1},
            "scheduler": "StepLR",
            "scheduler_kwargs": {"step_size": 1},
        }
    )
    mode = "killed" if kill_at_step else "run"
    path = out / f"hooks_{mode}_rank{os.environ['RANK']}.txt"
    out.mkdir(parents=True, exist_ok=True)
    trainer = Trainer(
        hps,
        out / "run",
        evaluate_every_n_steps=3,
        checkpoint_every="2 steps",
        callbacks=[Record(path, kill_at_step)],
        log_with=None,
        progress_bar=False,
        metrics=[Accuracy()],
        cpu=True,
    )
    # One validation batch of 16 on each process: validation gives every sample once, so each
    # process needs a batch of its own.
    validation = clusters(16 * int(os.environ["WORLD_SIZE"]), seed=2)
    trainer.fit(Classifier(), clusters(128, seed=1), validation)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("outs", type=Path, nargs="+")
    parser.add_argument("--kill-at-step", type=int)
    args = parser.parse_args()
    *whole, last = args.outs
    for out in whole:
        train(out, kill_at_step=None)
    train(last, args.kill_at_step)


if __name__ == "__main__":
    main()
