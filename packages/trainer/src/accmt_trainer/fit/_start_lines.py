"""The line a run says when it starts (afresh, or resumed from which checkpoint, epoch and
step, and what the resume costs), the one it says when a resumed run had nothing left to do,
and the one it says when a stop ended it before its end."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..console import processes

if TYPE_CHECKING:
    from accmt_state import TrainingState

    from ..checkpointing import Start
    from ._setup import PreparedRun


def start_line(
    folder: Path,
    start: Start,
    state: TrainingState,
    run: PreparedRun,
    epoch_batches: int | None,
    replayed: int = 0,
) -> str:
    """Whether the run starts afresh or resumes, and from where: the checkpoint (and the
    number of processes that made it, where that differs), the epoch (and the batch within
    it, mid-epoch) and the optimizer step; then what the resume costs: the checkpoint's bytes
    verified (once per machine) and loaded (by the process that loads most), and the
    ``replayed`` batches of a stream read again and skipped to reach the checkpoint's place."""
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
    line += (
        f"; verified {_size(start.verified_bytes)} once per machine, read up to "
        f"{_size(start.read_bytes)} per process"
    )
    if replayed:
        first, are = (
            ("first batch", "is") if replayed == 1 else (f"first {replayed} batches", "are")
        )
        line += (
            f"; the {first} of epoch {state.epoch + 1} of the stream {are} read again and "
            "skipped to reach its place"
        )
    return line


def _size(count: int) -> str:
    """``count`` bytes, in decimal units: ``512 B``, ``4.1 kB``, ``1.3 GB``."""
    if count < 1000:
        return f"{count} B"
    value = float(count)
    for unit in ("kB", "MB", "GB", "TB"):
        value /= 1000
        if round(value, 1) < 1000 or unit == "TB":
            break
    return f"{value:.1f} {unit}"


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
