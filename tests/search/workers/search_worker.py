"""A digits search for the tests that need real processes: killed and run again, two workers
sharing one study, or one search on two processes (tests/distributed/test_search.py).

    search_worker.py OUT --trials N [--storage URL] [--seed S] [--epochs E]
        [--kill-from-trial K --kill-step S]   SIGKILL this process at optimizer step S of the
                                              first trial numbered K or more that reaches it
        [--prune-trial T] [--fail-trial T]    prune trial T at its first evaluation; make
                                              trial T raise in on_fit_start
        [--barrier DIR --workers W]           wait until W workers are ready, then search
        [--then-fit]                          after the search, one Trainer.fit in OUT/after

Every process appends one JSON line per trial it trained to OUT/trained_rank<R>.jsonl: the
trial's folder, the HyperParameters and module argument it trained with, where it resumed
from and where it ended.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import optuna

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _data import DigitsMLP, PruneTrial, digits

from accmt_callbacks import Callback
from accmt_metrics import Accuracy
from accmt_search import HyperParameterSearch
from accmt_trainer import HyperParameters, Trainer


class Record(Callback):
    def __init__(self, out: Path) -> None:
        self.out = str(out)
        self.resumed_from: int | None = None

    def on_resume(self) -> None:
        self.resumed_from = self.state.global_step

    def on_fit_end(self) -> None:
        rank = self.trainer.accelerator.process_index
        line = {
            "folder": self.trainer.model_path.name,
            "hps": self.trainer.hps.to_dict(),
            "hidden": self.module.hidden,
            "resumed_from": self.resumed_from,
            "global_step": self.state.global_step,
            "finished": self.state.finished,
        }
        with open(Path(self.out) / f"trained_rank{rank}.jsonl", "a", encoding="utf-8") as stream:
            stream.write(json.dumps(line) + "\n")


class KillFrom(Callback):
    def __init__(self, trial: int, step: int) -> None:
        self.trial, self.step = trial, step

    def on_after_training_step(self) -> None:
        number = int(self.trainer.model_path.name.removeprefix("trial_"))
        if number >= self.trial and self.state.global_step == self.step:
            os.kill(os.getpid(), signal.SIGKILL)


class FailTrial(Callback):
    def __init__(self, trial: int) -> None:
        self.folder = f"trial_{trial}"

    def on_fit_start(self) -> None:
        if self.trainer.model_path.name == self.folder:
            raise ValueError(f"{self.folder} fails on purpose")


def wait_for_workers(barrier: Path, workers: int) -> None:
    barrier.mkdir(parents=True, exist_ok=True)
    (barrier / f"ready_{os.getpid()}").touch()
    deadline = time.monotonic() + 120
    while len(list(barrier.glob("ready_*"))) < workers:
        if time.monotonic() > deadline:
            raise TimeoutError("the other workers never came")
        time.sleep(0.05)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--trials", type=int, required=True)
    parser.add_argument("--storage")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--kill-from-trial", type=int)
    parser.add_argument("--kill-step", type=int)
    parser.add_argument("--prune-trial", type=int)
    parser.add_argument("--fail-trial", type=int)
    parser.add_argument("--barrier", type=Path)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--then-fit", action="store_true")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    callbacks: list[Callback] = [Record(args.out)]
    if args.kill_from_trial is not None:
        callbacks.append(KillFrom(args.kill_from_trial, args.kill_step))
    if args.fail_trial is not None:
        callbacks.append(FailTrial(args.fail_trial))
    train, valid = digits()
    search = HyperParameterSearch(
        DigitsMLP,
        train,
        valid,
        metrics=[Accuracy()],
        output_dir=args.out,
        seed=args.seed,
        log_with=None,
        checkpoint_every="epoch",
        callbacks=callbacks,
    )
    search.set_space(
        {
            "epochs": args.epochs,
            "batch_size": 32,
            "optimizer": "AdamW",
            "optimizer_kwargs.lr": {"type": "float", "low": 1e-3, "high": 3e-2, "log": True},
            "module.hidden": {"type": "categorical", "choices": [16, 32]},
        }
    )
    if args.barrier is not None:
        wait_for_workers(args.barrier, args.workers)
    pruner = PruneTrial(args.prune_trial) if args.prune_trial is not None else None
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    result = search.optimize(
        lambda metrics: metrics["validation"]["accuracy"],
        "maximize",
        n_trials=args.trials,
        storage=args.storage,
        pruner=pruner,
        heartbeat_interval=1,
        grace_period=2,
        plots=False,
    )
    summary: dict[str, Any] = {"finished": result.finished, "best": result.trial_number}
    print("RESULT " + json.dumps(summary), flush=True)
    if args.then_fit:
        fit_after(args.out, train)


def fit_after(out: Path, train: Any) -> None:
    """A plain fit in the same job, after the search: it makes the process group again."""
    hps = HyperParameters(epochs=1, batch_size=32, optimizer="SGD", optimizer_kwargs={"lr": 0.1})
    trainer = Trainer(hps, out / "after", log_with=None, progress_bar=False, cpu=True, seed=0)
    state = trainer.fit(DigitsMLP(), train)
    rank = trainer.accelerator.process_index
    record = {"world": trainer.accelerator.num_processes, "global_step": state.global_step}
    (out / f"after_rank{rank}.json").write_text(json.dumps(record), encoding="utf-8")


if __name__ == "__main__":
    main()
