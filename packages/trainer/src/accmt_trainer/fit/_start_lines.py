"""The line a run says when it starts (afresh, or resumed from which checkpoint, epoch and
step), the one it says when a resumed run had nothing left to do, the one it says when a
stop ended it before its end, and the one it says when it reads a stream again to resume."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..console import processes

if TYPE_CHECKING:
    from accmt_state import TrainingState

    from ..checkpointing import Start
    from ._setup import PreparedRun


def start_line(
    folder: Path, start: Start, state: TrainingState, run: PreparedRun, epoch_batches: int | None
) -> str:
    """Whether the run starts afresh or resumes, and from where: the checkpoint (and the
    number of processes that made it, where that differs), the epoch (and the batch within
    it, mid-epoch) and the optimizer step."""
    epochs, steps, checkpoint = run.epochs, run.total_steps, start.folder
    if checkpoint is None:
        return (
            f"starting afresh in {folder}: {_count(epochs, 'epoch')}, "
            f"{_count(steps, 'optimizer step')}"
        )
    seen = state.batches_seen_in_epoch
    where = (
        f"epoch {state.epoch + 1}/{epochs} at batch {seen}/{epoch_batches or '?'}"
        if seen
        else f"epoch {state.epoch}/{epochs} done"
    )
    made = "" if start.made_on is None else f" (made on {processes(start.made_on)})"
    line = f"resuming {folder} from {checkpoint.name}{made}: {where}"
    line += f", step {state.global_step}/{steps}"
    if state.finished:
        line += f" (that run had finished; it goes on to {_count(epochs, 'epoch')})"
    return line


def _count(count: int, thing: str) -> str:
    return f"{count} {thing}" if count == 1 else f"{count} {thing}s"


def finished_line(folder: Path, state: TrainingState) -> str:
    """A run resumed at its end: nothing to train, and how to train more."""
    return (
        f"{folder} already finished (epoch {state.epoch}, step {state.global_step}): nothing to "
        "do. Raise epochs (or max_steps) to train on, or pass resume=False to start afresh"
    )


def stopped_line(reason: str, state: TrainingState, checkpoint: Path | None) -> str:
    """A run stopped before its end: why, where it stopped, where it can resume from, and that it
    did not finish (a script that goes on after ``fit`` should know)."""
    where = f"epoch {state.epoch + 1}, step {state.global_step}"
    saved = f"its checkpoint is {checkpoint}" if checkpoint else "no checkpoint was written"
    return (
        f"stopped at {where} ({reason or 'a stop was asked'}): the run did not finish; {saved}; "
        "fit again (run the script again) to resume it"
    )


def replay_line(seen: int, epoch: int) -> str:
    """A stream resumed within an epoch: it has no index to start from, so it is read again."""
    batches = f"{seen} batch" if seen == 1 else f"{seen} batches"
    return (
        f"the training data is a stream: its first {batches} of epoch {epoch + 1} are read "
        "again and skipped to reach the checkpoint's place in it"
    )
