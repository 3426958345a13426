"""A run that can be killed and resumed; used by tests/distributed/test_resume.py.

    resume_worker.py OUT [--kill-at-step N] [--kill-in-checkpoint K] [--async] [--curriculum]
    resume_worker.py OUT --damaged
    resume_worker.py --plan PLAN.json --launch I

Trains with shuffling, dropout, gradient accumulation and a warm-up scheduler, checkpointing
every 3 optimizer steps into OUT/run. ``--kill-at-step N`` SIGKILLs this process right after
optimizer step N; ``--kill-in-checkpoint K`` SIGKILLs it in the middle of writing the K-th
checkpoint of this launch (after the model and RNGs are written, before the manifest). A run
that completes writes each process's final weights to OUT/final_rank<R>.pt.
``--curriculum`` trains on three stages instead (see ``curriculum``), for 24 optimizer steps.
``--damaged`` resumes OUT/run's newest checkpoint (which the test damaged) by its index: a
"refused" event notes the error.
Each file of a complete checkpoint that a process hashes (to verify it: a checkpoint being
written is hashed in its temporary folder) is noted in a "hashed" event.

With ``--plan``, one launch trains several runs one after the other, each into its own OUT:
PLAN.json lists the launches, each a list of runs (each the arguments of the first form), and
this is launch I. A run that kills itself is the last of its launch. Each run appends to
OUT/events_rank<R>.jsonl a "start", then a "kill" just before its SIGKILL or an "end" once its
final weights are written, each with the launch's number.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

import _toy as toy
import torch
from _toy import clusters

from accmt_callbacks import Callback
from accmt_state import TrainingState
from accmt_trainer import CheckpointError, HyperParameters, StepsCurriculum, Trainer
from accmt_trainer.checkpointing import _manifest
from accmt_trainer.checkpointing._run_facts import FileEntry


def curriculum() -> StepsCurriculum:
    """Stage 0 ends at step 9, a checkpoint's step, after whole passes on one process and in
    the middle of one on two; stage 1 is cut inside its second pass on two processes; stage 2
    takes the rest up to max_steps (24)."""
    stages = StepsCurriculum()
    stages.add(clusters(40, seed=3), 9)
    stages.add(clusters(200, seed=1), 8)
    stages.add(clusters(24, seed=4), -1)
    return stages


class Classifier(toy.Classifier):
    def __init__(self) -> None:
        super().__init__(hidden=32, activation=torch.nn.ReLU, dropout=0.3)

    def validation_step(self, key: str, batch: Any) -> torch.Tensor:
        return torch.nn.functional.cross_entropy(self.model(batch[0]), batch[1])


class Events:
    """What happens to one run in one launch, appended to OUT/events_rank<R>.jsonl. Each line
    is written through at once: a SIGKILL leaves no chance to write later."""

    def __init__(self, out: Path, launch: int) -> None:
        self.path = out / f"events_rank{os.environ.get('RANK', '0')}.jsonl"
        self.launch = launch

    def note(self, event: str, **details: Any) -> None:
        with self.path.open("a") as file:
            file.write(json.dumps({"launch": self.launch, "event": event, **details}) + "\n")

    def kill(self, at: str) -> None:
        self.note("kill", at=at)
        os.kill(os.getpid(), signal.SIGKILL)


class KillAtStep(Callback):
    def __init__(self, step: int, events: Events) -> None:
        self.step = step
        self.events = events

    def on_after_training_step(self) -> None:
        if self.state.global_step == self.step and self.trainer.accelerator.is_main_process:
            self.events.kill(f"step {self.step}")


@contextmanager
def kill_inside_checkpoint(which: int, events: Events) -> Iterator[None]:
    """SIGKILL the process half-way through the ``which``-th checkpoint it writes inside the
    block: the state file is written after Accelerate's files and before the manifest (in the
    background writer's thread when checkpoints are asynchronous)."""
    save = TrainingState.save
    written = []

    def half_write(state: TrainingState, path: str | os.PathLike[str], **options: Any) -> None:
        save(state, path, **options)
        if ".tmp-checkpoint" in str(path):
            written.append(path)
            if len(written) == which:
                events.kill(f"checkpoint {which}")

    TrainingState.save = half_write  # type: ignore[method-assign]
    try:
        yield
    finally:
        TrainingState.save = save  # type: ignore[method-assign]


@contextmanager
def hashes_noted(events: Events) -> Iterator[None]:
    """Note each file of a complete checkpoint (``checkpoint_<index>``) this process hashes."""
    describe = _manifest.describe

    def noted(path: Path) -> FileEntry:
        for folder in path.parents:
            if re.fullmatch(r"checkpoint_\d+", folder.name):
                where = {"checkpoint": folder.name, "file": str(path.relative_to(folder))}
                events.note("hashed", **where)
                break
        return describe(path)

    _manifest.describe = noted
    try:
        yield
    finally:
        _manifest.describe = describe


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--kill-at-step", type=int)
    parser.add_argument("--kill-in-checkpoint", type=int)
    parser.add_argument("--async", dest="background", action="store_true")
    parser.add_argument("--curriculum", action="store_true")
    parser.add_argument("--ema", action="store_true")
    parser.add_argument("--damaged", action="store_true")
    return parser.parse_args(argv)


def train(args: argparse.Namespace, launch: int) -> None:
    args.out.mkdir(parents=True, exist_ok=True)
    events = Events(args.out, launch)
    events.note("start")
    hps = HyperParameters.from_dict(
        {
            "epochs": 3,
            "max_steps": 24 if args.curriculum else None,
            "batch_size": 8,
            "optimizer": "AdamW",
            "optimizer_kwargs": {"lr": 0.01},
            "scheduler": "LinearWithWarmup",
            "scheduler_kwargs": {"num_warmup_steps": 4},
        }
    )
    callbacks = [KillAtStep(args.kill_at_step, events)] if args.kill_at_step else []
    resume = None
    if args.damaged:
        resume = int(max((args.out / "run" / "checkpoints").glob("checkpoint_*")).name[11:])
    trainer = Trainer(
        hps,
        args.out / "run",
        grad_accumulation_steps=2,
        checkpoint_every="3 steps",
        evaluate_every_n_steps=5,
        seed=7,
        log_with=None,
        progress_bar=False,
        cpu=True,
        callbacks=callbacks,
        checkpoint_async=args.background,
        ema_decay=0.9 if args.ema else None,
        resume=resume,
    )
    samples = curriculum() if args.curriculum else clusters(200, seed=1)
    if args.damaged:
        try:
            with hashes_noted(events):
                trainer.fit(Classifier(), samples, clusters(48, seed=2))
        except CheckpointError as error:
            events.note("refused", error=str(error))
        return
    killing = args.kill_in_checkpoint
    with (
        kill_inside_checkpoint(killing, events) if killing else nullcontext(),
        hashes_noted(events),
    ):
        state = trainer.fit(Classifier(), samples, clusters(48, seed=2))
    model = trainer.accelerator.unwrap_model(trainer.model)
    weights = {name: value.detach().cpu() for name, value in model.state_dict().items()}
    averaged = trainer.averaged_weights() or {}
    weights.update({f"average/{name}": value.detach().cpu() for name, value in averaged.items()})
    rank = trainer.accelerator.process_index
    torch.save({"weights": weights, "state": state.to_dict()}, args.out / f"final_rank{rank}.pt")
    events.note("end", global_step=state.global_step)


def main() -> None:
    if sys.argv[1] != "--plan":
        train(parse(sys.argv[1:]), launch=0)
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("--plan", type=Path, required=True)
    parser.add_argument("--launch", type=int, required=True)
    args = parser.parse_args()
    for run in json.loads(args.plan.read_text())[args.launch]:
        train(parse(run), args.launch)


if __name__ == "__main__":
    main()
