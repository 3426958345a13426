"""Where a checkpoint's moment lies in this run, on its number of processes or another.

Accelerate deals the batches of one order (one seeded, epoch-shuffled batch sampler) round-robin:
on W processes, process ``i`` reads batches ``i, i + W, i + 2W, ...``. So after ``b`` batches on
each of W processes a run has consumed the first ``b * W`` batches of the epoch's order, whatever
W was, and on W' processes the same moment is ``b * W / W'`` batches on each: a moment this run
can start from when that is a whole number of its accumulation windows. An epoch's start (and a
finished run) is such a moment on any number of processes.

The counters never jump: ``global_step`` and ``batch_iteration`` keep the checkpoint's values and
go on from there, so a tracker's steps stay monotonic. What they would be on this number of
processes from the first step differs from them by an offset, which the run's facts carry into
every later checkpoint (``step_offset``, ``iteration_offset``): the check that a state describes a
moment of its run holds after a resize, and after another.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import torch

from accmt_state import TrainingState

from .._errors import CheckpointError
from ..console import processes
from ..data import StageLayout
from ._run_facts import FileEntry, RunFacts

# The files of one process of the checkpoint: its loss windows, its place in the training
# stream, its RNG states (Accelerate's), its shard of a torch.distributed.checkpoint folder.
_ONE_PROCESS = re.compile(
    r"(?:process_|stream_|random_states_|__)(\d+)(?:_\d+)?\.(?:safetensors|pkl|distcp)"
)

# Scheduler attributes that size a schedule and that load_state_dict would put back to the
# checkpoint's (OneCycleLR, CosineAnnealingLR, LinearLR, PolynomialLR). LambdaLR-based
# schedules keep their length in their rebuilt lambdas, which a state_dict does not hold.
_LENGTHS = ("total_steps", "_schedule_phases", "T_max", "total_iters")


@attrs.frozen(kw_only=True)
class Position:
    """The counters of a run after some batches of an epoch. ``global_step`` and
    ``batch_iteration`` are None for a stream without a length: only the run that read its
    epochs knows their lengths."""

    batches_seen_in_epoch: int
    global_step: int | None = None
    batch_iteration: int | None = None


def position_at(facts: RunFacts, epoch: int, seen: int, path: Path) -> Position:
    """The counters of a run with ``facts`` after ``seen`` batches of ``epoch``: whole epochs of
    ``batches_per_epoch`` batches (or the epochs of its stages), one optimizer step per
    accumulation window, plus the offsets the run carries from a resume on another number of
    processes."""
    batches, accumulation = facts.batches_per_epoch, facts.grad_accumulation_steps
    if batches is None:
        return Position(batches_seen_in_epoch=seen)
    if facts.stages:
        layout = StageLayout.from_stage_facts(facts.stages, accumulation)
        if epoch > layout.epochs:
            raise CheckpointError(
                f"{path}: epoch is {epoch}, but this run's stages take {layout.epochs} epochs"
            )
        batches = layout.epoch(min(epoch, layout.epochs - 1))[1]
        step, iteration = layout.counters_at(epoch, min(seen, batches))
    else:
        steps_per_epoch = -(-batches // accumulation)
        step = epoch * steps_per_epoch + -(-seen // accumulation)
        iteration = epoch * batches + seen
    return Position(
        batches_seen_in_epoch=min(seen, batches),
        global_step=step + facts.step_offset,
        batch_iteration=iteration + facts.iteration_offset,
    )


def check_position(state: TrainingState, facts: RunFacts, path: Path) -> None:
    """The counters of a resumed state must describe a moment of the run that made it (whose
    ``facts`` its manifest holds)."""
    seen = state.batches_seen_in_epoch
    expected = position_at(facts, state.epoch, seen, path)
    for field in attrs.fields(Position):
        value = getattr(expected, field.name)
        found = getattr(state, field.name)
        if value is not None and found != value:
            raise CheckpointError(
                f"{path}: {field.name} is {found}, but with epoch={state.epoch}, "
                f"batches_seen_in_epoch={seen}, {facts.batches_per_epoch} batches per epoch "
                f"and accumulation {facts.grad_accumulation_steps} it must be {value}; the "
                "state does not describe a moment of this run"
            )


def seen_here(state: TrainingState, made: RunFacts, now: RunFacts) -> int | None:
    """The batches of ``state``'s epoch each of this run's processes has consumed at the
    checkpoint's moment, or None when this run cannot start there. ``made`` are the facts of
    the run that made the checkpoint, ``now`` this run's."""
    seen, made_on, now_on = state.batches_seen_in_epoch, made.world_size, now.world_size
    if made_on == now_on or seen == 0:
        return seen
    if made.batches_per_epoch is None or now.batches_per_epoch is None:
        return None  # a stream without a length: where its epoch stands elsewhere is unknown
    if seen >= made.batches_per_epoch:
        return now.batches_per_epoch  # read to its end; only its closing is left
    if made.order_batches is None or made.order_batches != now.order_batches:
        return None
    consumed, window = seen * made_on, now_on * now.grad_accumulation_steps
    return consumed // now_on if consumed % window == 0 else None


def fitting_counts(state: TrainingState, made: RunFacts) -> list[int]:
    """The numbers of processes that split the batches consumed of the checkpoint's epoch into
    whole accumulation windows each."""
    windows = state.batches_seen_in_epoch * made.world_size // made.grad_accumulation_steps
    return [count for count in range(1, windows + 1) if windows % count == 0]


def refusal(state: TrainingState, made: RunFacts, now: RunFacts, earlier: str | None) -> str:
    """Why this run cannot start at ``state``'s moment, and what would: another number of
    processes, an earlier checkpoint (``earlier``: its index and moment), or a fresh start."""
    seen, made_on, now_on = state.batches_seen_in_epoch, made.world_size, now.world_size
    accumulation = now.grad_accumulation_steps
    each = "" if made_on == 1 else f" ({seen} on each of {processes(made_on)})"
    where = (
        f"it was made at batch {seen} of epoch {state.epoch + 1} (step {state.global_step}), "
        f"after {seen * made_on} batches of the epoch's order{each}"
    )
    todo = []
    if made.stream is not None:
        why = (
            f"the training stream {made.stream} keeps its place within an epoch for the "
            f"{processes(made_on)} that read it (each its own, or the main process's that "
            f"dealt it), which does not split onto {processes(now_on)}"
        )
        todo.append(f"resume it on {processes(made_on)}, as it was made")
    elif made.order_batches is None or now.order_batches is None:
        why = (
            "this run cannot count the batches of that order (a loader without a length, or "
            "one that deals its batches itself), so it cannot find that moment"
        )
    elif made.order_batches != now.order_batches:
        why = (
            f"that order had {made.order_batches} batches an epoch, and this run's has "
            f"{now.order_batches}: the data or the batch size differs"
        )
    else:
        counts = fitting_counts(state, made)
        shown = ", ".join(map(str, counts[:8])) + (", ..." if len(counts) > 8 else "")
        why = (
            f"on {processes(now_on)} that is {seen * made_on / now_on:g} batches each, not a "
            f"whole number of accumulation windows of {accumulation} batches"
        )
        todo.append(f"resume it on a number of processes that splits it so: {shown}")
    if earlier:
        todo.append(f"pass resume={earlier}, a moment this run can start from")
    else:
        todo.append("resume from a checkpoint made at an epoch's end (any number of processes")
        todo[-1] += " can start from one)"
    return f"{where}; {why}. To go on: {'; or '.join(todo)}"


def resized_facts(facts: RunFacts, state: TrainingState, path: Path) -> RunFacts:
    """This run's facts with the offsets between ``state``'s counters (mapped onto this run)
    and what this run's own count from its first step would be."""
    plain = facts.with_offsets(0, 0)
    counted = position_at(plain, state.epoch, state.batches_seen_in_epoch, path)
    step, iteration = counted.global_step, counted.batch_iteration
    return facts.with_offsets(
        0 if step is None else state.global_step - step,
        0 if iteration is None else state.batch_iteration - iteration,
    )


def ranks_taken_over(rank: int, made_on: int, now_on: int) -> list[int]:
    """The ranks of the checkpoint whose losses (loss sums and counts) process ``rank`` of
    this run takes: every ``now_on``-th from ``rank``, so that each is taken once."""
    return list(range(rank, made_on, now_on)) if made_on != now_on else [rank]


def read_by_a_process(files: Mapping[str, FileEntry], made_on: int, now_on: int) -> int:
    """The most bytes of the checkpoint's ``files`` that one of this run's processes loads:
    every file, but of those of one process of the checkpoint (``_ONE_PROCESS``), only those of
    the processes it takes over. Counted by file: a process that reads part of a file of
    torch.distributed.checkpoint (on another number of processes) counts all of it."""
    shared, own = 0, [0] * now_on
    for name, entry in files.items():
        found = _ONE_PROCESS.fullmatch(Path(name).name)
        if found is None:
            shared += entry.size
            continue
        for rank in range(now_on):
            if int(found[1]) in ranks_taken_over(rank, made_on, now_on):
                own[rank] += entry.size
    return shared + max(own)


def merge_losses(losses: Sequence[Mapping[str, Any]], like: Mapping[str, Any]) -> dict[str, Any]:
    """Loss windows of several processes as one: sums, counts and items added, so that the mean
    over every process is the same. ``like`` gives the keys when there are none to take."""
    merged: dict[str, Any] = {}
    for key in like:
        windows = [each[key] for each in losses]
        zero = torch.zeros((), dtype=torch.float64)
        total = sum((w["total"] for w in windows), zero)
        items = sum((w.get("items", zero) for w in windows), zero)
        count = sum(int(w["count"]) for w in windows)
        merged[key] = {"total": total, "count": count, "items": items}
    return merged


def schedule_lengths(scheduler: Any) -> list[tuple[Any, dict[str, Any]]]:
    """The attributes that size ``scheduler`` (and the schedulers it chains), as this run
    built them; :func:`restore_lengths` puts them back after a checkpoint's state is loaded."""
    found = []
    for each in _schedulers(getattr(scheduler, "scheduler", scheduler)):
        sized = {name: getattr(each, name) for name in _LENGTHS if hasattr(each, name)}
        if sized:
            found.append((each, sized))
    return found


def restore_lengths(lengths: Iterable[tuple[Any, dict[str, Any]]]) -> None:
    """The schedule is this run's length: steps done plus the steps left on this number of
    processes. The learning rate goes on from the checkpoint's (the optimizer's state)."""
    for scheduler, sized in lengths:
        for name, value in sized.items():
            setattr(scheduler, name, value)


def _schedulers(scheduler: Any) -> list[Any]:
    nested = getattr(scheduler, "_schedulers", None)
    if not isinstance(nested, list):
        return [scheduler]
    return [scheduler, *(inner for each in nested for inner in _schedulers(each))]


def resize_warning(checkpoint: Path, made_on: int, now_on: int) -> str:
    """What a resume on another number of processes keeps exactly, and what it does not."""
    return (
        f"resuming {checkpoint.name}, made on {processes(made_on)}, on {processes(now_on)}: "
        "the model, optimizer, scheduler and counters are the checkpoint's, and the samples "
        "that come next are those the run had not yet read; the learning-rate schedule ends at "
        "this run's last step. Not bit-identical to a run that kept "
        f"{processes(made_on)}: the random streams (dropout, data-loader worker seeds; each "
        "process takes the RNG state of the process of its rank, if the checkpoint has one) "
        "and the float order in which gradients are averaged across processes"
    )
