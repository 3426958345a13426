"""Checkpoint folders: written whole or not at all, verified before they are trusted.

Layout under ``<model_path>/checkpoints``::

    checkpoint_000004/             one complete checkpoint
        accelerate/                Accelerate's save_state: model, optimizer, scheduler,
                                   scaler, RNGs (read back with weights_only=True)
        state.json                 the TrainingState
        callbacks.json             the callbacks' states
        trackers.json              the tracker runs a resume continues (MLflow, W&B)
        frozen.json                the parameters frozen for the whole fit so far, which the
                                   model's weights leave out: name, shape, dtype, digest
                                   (only when the model has some: ``_frozen``)
        object_<i>.safetensors     each object given to Trainer.register_for_checkpointing
        process_<rank>.safetensors each process's loss accumulators
        stream_<rank>.safetensors  each process's place in the training stream (its loader's
                                   state), where the stream resumes from its own place
        manifest.json              written last: versions, world size, every file's size and
                                   xxh3-128 digest
    latest.json                    which checkpoint is newest, replaced atomically
    .tmp-checkpoint_000005/        a checkpoint being written; never read, removed on the next
                                   save

Every process writes into the temporary folder; once all have finished, the main process
writes the manifest and renames the folder into place, and then, in the background writer,
syncs it, moves the pointer and only then removes checkpoints past ``max_checkpoints``
(``_checkpoint_commit``).
Nothing in a checkpoint is unpickled with code execution: tensors are safetensors or torch
archives read with ``weights_only=True``, FSDP's sharded state dicts torch.distributed.checkpoint
folders checked first by ``_dcp``, the rest is JSON.
"""

from __future__ import annotations

import shutil
import time
import warnings
from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import attrs
import torch
from accelerate import Accelerator
from accelerate.utils import DistributedType

from accmt_callbacks import CallbackHandler
from accmt_state import TrainingState, write_json

from .._errors import CheckpointError, TrainerConfigError
from ..config import option, positive_int
from ..console import processes
from ._background_writer import BackgroundWriter
from ._commit import POINTER, complete_checkpoints, guarded, place, settle
from ._folders import free_sibling, set_aside_folder
from ._frozen import FrozenWeights
from ._manifest import ELSEWHERE, SHARDED, check_compatible, verified_on_this_machine
from ._parts import AccelerateSnapshot, Checkpointable, Parts, read_losses, read_tracker_runs
from ._resize import (
    check_position,
    merge_losses,
    ranks_taken_over,
    read_by_a_process,
    refusal,
    resized_facts,
    seen_here,
)
from ._run_facts import Manifest, RunFacts, read_manifest
from ._schedule import CheckpointSchedule, Unit, parse_checkpoint_every
from ._tied_weights import tied_weights_unannounced

_DONE = ".done-"


def _resume_value(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and not isinstance(value, (bool, int)):
        raise TrainerConfigError(
            f"Trainer(resume=...): expected None, True, False or a checkpoint index, got {value!r}"
        )


@attrs.frozen(kw_only=True)
class CheckpointOptions:
    """The Trainer's options of checkpoints and resume, checked when the Trainer is made."""

    checkpoint_every: str | None = "epoch"
    """When checkpoints are taken: ``"epoch"``, ``"2ep"``, ``"500 steps"``, ``"eval"``; None:
    never."""
    resume: bool | int | None = attrs.field(default=None, validator=_resume_value)
    """None resumes the newest checkpoint if any, True requires one, False starts afresh, an
    int picks one by index (-1: the newest)."""
    max_checkpoints: int | None = attrs.field(
        default=None, validator=option(positive_int, allow_none=True)
    )
    """Keep only the newest N checkpoints (None: all)."""
    checkpoint_async: bool = False
    """Write checkpoints in the background, the loop waiting only for a copy in memory."""
    schedule: CheckpointSchedule | None = attrs.field(
        init=False,
        default=attrs.Factory(lambda self: parse_checkpoint_every(self.checkpoint_every), True),
    )
    """``checkpoint_every`` read (a bad one is refused when the options are made)."""

    @property
    def resumes(self) -> bool:
        """Whether a fit looks for a checkpoint to resume from."""
        return self.schedule is not None or self.resume is not None


@attrs.frozen(kw_only=True)
class Start:
    """Where a fit starts: afresh, or at a checkpoint's moment mapped onto this run."""

    facts: RunFacts
    """This run's facts, with the counters' offsets: what its checkpoints record."""
    folder: Path | None = None
    """The checkpoint it resumes, or None: afresh."""
    state: TrainingState | None = None
    """The checkpoint's state, moved to this run's position in the same data."""
    losses: Mapping[str, Any] | None = None
    """This process's training loss windows (those of the checkpoint's processes it takes
    over, merged, on another number of processes)."""
    made_on: int | None = None
    """The checkpoint's number of processes where it differs from this run's, else None."""
    tracker_runs: Mapping[str, str] = attrs.field(factory=dict)
    """The checkpoint's tracker runs (``{tracker name: run id}``) that this run continues."""
    frozen: FrozenWeights | None = None
    """The model's frozen parameters (checked against the checkpoint's), which checkpoints
    leave out; None when the run takes and resumes no checkpoint, or shards its model."""
    verified_bytes: int = 0
    """The bytes of the checkpoint read and hashed to verify it, once on each machine."""
    read_bytes: int = 0
    """The most bytes of the checkpoint that one process loads (counted by file)."""


class Checkpoints:
    """The checkpoints of one run, under ``root``: written, chosen, verified and read here.

    ``models``, ``optimizer`` and ``scheduler`` are what Accelerate prepared, in its order;
    a background write copies them (``checkpoint_async``).
    """

    def __init__(
        self,
        root: Path,
        accelerator: Accelerator,
        options: CheckpointOptions,
        *,
        objects: Sequence[Checkpointable] = (),
    ) -> None:
        self.root = root
        self.accelerator = accelerator
        self.options = options
        self.max_checkpoints = options.max_checkpoints
        self.objects = list(objects)
        self.checkpoint_async = checkpoint_async = options.checkpoint_async
        self.writer = BackgroundWriter()
        self._buffers: AccelerateSnapshot | None = None
        self.frozen: FrozenWeights | None = None
        """The model's frozen parameters, left out of checkpoints (set by :meth:`start`)."""
        kind = accelerator.distributed_type
        if checkpoint_async and kind in SHARDED:
            raise TrainerConfigError(
                f"Trainer(checkpoint_async=True) supports one device and DDP; {kind.value} "
                "writes its sharded state through its own path: use checkpoint_async=False"
            )

    # ---------------------------------------------------------------------------- write

    @property
    def scheduled(self) -> bool:
        """Whether the run takes checkpoints at all (``checkpoint_every`` is not None)."""
        return self.options.schedule is not None

    def due(self, unit: Unit, count: int) -> bool:
        r"""Whether ``checkpoint_every`` asks for a checkpoint after ``count`` ``unit``\ s."""
        schedule = self.options.schedule
        return schedule is not None and schedule.due(unit, count)

    def save(
        self,
        index: int,
        facts: RunFacts,
        state: TrainingState,
        callbacks: CallbackHandler,
        losses: Mapping[str, Any],
        *,
        tracker_runs: Mapping[str, str] | None = None,
        snapshot_of: tuple[Sequence[torch.nn.Module], Any, Any] | None = None,
        stream: Mapping[str, Any] | None = None,
    ) -> None:
        """Write checkpoint ``index`` from every process: ``losses`` are this process's loss
        windows, ``tracker_runs`` the runs a resume continues, ``stream`` this process's place
        in the training stream (where it resumes from its own place). In the background, the
        call returns once everything is copied to CPU memory (``snapshot_of``: models,
        optimizer and scheduler); otherwise once the checkpoint is in place (its sync to the
        disk, and the removal of the oldest, go on in the background writer)."""
        self.writer.wait()
        accelerator = self.accelerator
        final = self.root / f"checkpoint_{index:06d}"
        temporary = self.root / f".tmp-{final.name}"
        if accelerator.is_main_process:
            self.root.mkdir(parents=True, exist_ok=True)
            shutil.rmtree(temporary, ignore_errors=True)
            temporary.mkdir()
        accelerator.wait_for_everyone()
        runs, copy, frozen = tracker_runs or {}, self.checkpoint_async, self.frozen
        if frozen is not None:
            frozen.note_trainable()
        record = None if frozen is None else frozen.record()
        parts = Parts.of(
            state, callbacks, losses, self.objects, runs, copy=copy, frozen=record, stream=stream
        )
        if self.checkpoint_async and snapshot_of is not None:
            snapshot = AccelerateSnapshot.take(
                accelerator, *snapshot_of, reuse=self._buffers, frozen=frozen
            )
            self._buffers = snapshot
            self.writer.start(lambda: self._write_later(temporary, final, facts, parts, snapshot))
            return
        with tied_weights_unannounced(), frozen.saving(accelerator) if frozen else nullcontext():
            guarded(temporary, lambda: accelerator.save_state(str(temporary / "accelerate")))
        guarded(temporary, lambda: parts.write(temporary, accelerator))
        accelerator.wait_for_everyone()
        if accelerator.is_main_process:
            place(temporary, final, facts)
            self.writer.start(lambda: settle(final, self.max_checkpoints))
        accelerator.wait_for_everyone()

    def wait(self) -> None:
        """Until the background write in flight (if any) is done; re-raises its error."""
        self.writer.wait()

    def _write_later(
        self,
        temporary: Path,
        final: Path,
        facts: RunFacts,
        parts: Parts,
        snapshot: AccelerateSnapshot,
    ) -> None:
        """In the writer thread: this process's files, then (main process) the checkpoint
        once every process has marked its part done. No collective runs here: they belong
        to the training thread."""
        accelerator = self.accelerator
        with tied_weights_unannounced():  # the writer thread's own context
            guarded(temporary, lambda: snapshot.write(temporary / "accelerate", accelerator))
        guarded(temporary, lambda: parts.write(temporary, accelerator))
        (temporary / f"{_DONE}{accelerator.process_index}").touch()
        if not accelerator.is_main_process:
            return
        markers = [temporary / f"{_DONE}{rank}" for rank in range(accelerator.num_processes)]
        while not all(marker.exists() for marker in markers):
            time.sleep(0.01)
        for marker in markers:
            marker.unlink()
        place(temporary, final, facts)
        settle(final, self.max_checkpoints)

    # ------------------------------------------------------------------------- resume

    def start(self, facts: RunFacts, model: torch.nn.Module) -> Start:
        """Where this fit starts: afresh, or at the moment of the checkpoint ``resume`` names,
        verified, its frozen base checked against ``model``'s (the prepared model) and mapped
        onto this run's number of processes (a run that takes no checkpoints and was given no
        ``resume`` looks for none). None resumes the newest intact checkpoint when there is
        one, True requires one, False starts afresh, an int picks one by index (-1: the
        newest). Nothing is moved here: see :meth:`clear_way`; the rest is read back by the
        fit's ``Resume``."""
        options = self.options
        kind = self.accelerator.distributed_type
        fsdp2 = kind == DistributedType.FSDP and bool(getattr(self.accelerator, "is_fsdp2", False))
        sharded = kind in SHARDED and not fsdp2
        # Taken once, when the fit starts: the digests of the frozen weights it checks and
        # records (a model split by FSDP1 or DeepSpeed is checkpointed whole: see _frozen).
        self.frozen = frozen = FrozenWeights(model) if options.resumes and not sharded else None
        found = self._find(options.resume, facts) if options.resumes else None
        if found is None:
            return Start(facts=resized_facts(facts, TrainingState(), self.root), frozen=frozen)
        folder, manifest = found
        made = manifest.facts
        if frozen is not None:
            frozen.check(folder)
        state = TrainingState.load(folder / "state.json")
        check_position(state, made, folder / "state.json")
        state.batches_seen_in_epoch = state.train_step = self._seen_here(folder, state, made, facts)
        return Start(
            facts=resized_facts(facts, state, folder / "state.json"),
            folder=folder,
            state=state,
            losses=self._losses(folder, made.world_size, facts.world_size),
            made_on=None if made.world_size == facts.world_size else made.world_size,
            tracker_runs=read_tracker_runs(folder),
            frozen=frozen,
            verified_bytes=sum(entry.size for entry in manifest.files.values()),
            read_bytes=read_by_a_process(manifest.files, made.world_size, facts.world_size),
        )

    def _find(self, resume: bool | int | None, facts: RunFacts) -> tuple[Path, Manifest] | None:
        """The checkpoint ``resume`` names and its manifest, the facts of the run that made it
        checked against this run's; None to start afresh."""
        if resume is False:
            return None
        found = self._choose(_which(resume))
        if found is None and resume is not None:
            raise CheckpointError(f"resume={resume!r}, but {self.root} holds no checkpoint")
        if found is None:
            return None
        check_compatible(found[1].facts, facts, found[0])
        return found

    def _seen_here(self, folder: Path, state: TrainingState, made: RunFacts, now: RunFacts) -> int:
        """The batches of the checkpoint's epoch each of this run's processes has consumed."""
        seen = seen_here(state, made, now)
        cap = now.max_steps
        if seen is None and state.finished and cap is not None and state.global_step >= cap:
            # Finished at this run's max_steps: nothing is left to train, the moment is moot.
            read = state.batches_seen_in_epoch * made.world_size // now.world_size
            seen = min(read, now.batches_per_epoch or read)
        if seen is None:
            earlier = self._earlier_that_fits(folder, now)
            raise CheckpointError(
                f"checkpoint {folder} was made on {processes(made.world_size)}, and this run "
                f"has {now.world_size}; {refusal(state, made, now, earlier)}; or {ELSEWHERE}."
            )
        return seen

    def _losses(self, folder: Path, made_on: int, now_on: int) -> Mapping[str, Any]:
        """This process's loss windows: those of the checkpoint's processes it takes over."""
        rank = self.accelerator.process_index
        losses = [read_losses(folder, old) for old in ranks_taken_over(rank, made_on, now_on)]
        if len(losses) == 1:
            return losses[0]
        return merge_losses(losses, like=read_losses(folder, 0))

    def _earlier_that_fits(self, folder: Path, facts: RunFacts) -> str | None:
        """``<index> (checkpoint_<index>, ...)`` of the newest checkpoint before ``folder``
        whose moment this run can start from, if any."""
        for path in reversed([p for p in self.complete() if _index(p) < _index(folder)]):
            try:
                made = read_manifest(path).facts
                state = TrainingState.load(path / "state.json")
            except Exception:  # a damaged one is not offered
                continue
            if seen_here(state, made, facts) is not None:
                where = f"epoch {state.epoch}, step {state.global_step}"
                return f"{_index(path)} ({path.name}, {where})"
        return None

    def clear_way(self, chosen: Path | None) -> None:
        """Once the run's checks passed: ``resume=False`` moves the earlier checkpoints aside,
        ``resume=<index>`` those newer than ``chosen``; a failed start leaves them in place."""
        resume = self.options.resume
        if resume is False:
            self._set_aside()
        elif chosen is not None and _which(resume) != -1:
            self._set_aside_newer(chosen)

    def _set_aside(self) -> None:
        """Move earlier checkpoints out of the way of a fresh run (``resume=False``)."""
        accelerator = self.accelerator
        if accelerator.is_main_process and self.complete():
            moved = set_aside_folder(self.root)
            warnings.warn(f"resume=False: earlier checkpoints moved to {moved}", stacklevel=3)
        accelerator.wait_for_everyone()

    def _set_aside_newer(self, chosen: Path) -> None:
        """Move the checkpoints newer than ``chosen`` (``resume=<index>``) into a
        ``checkpoints.old-<n>`` folder: they belong to the run this one branches off, and an
        automatic resume must not take them for this run's. Nothing is deleted."""
        accelerator = self.accelerator
        newer = [path for path in self.complete() if _index(path) > _index(chosen)]
        if accelerator.is_main_process and newer:
            aside = free_sibling(self.root)
            aside.mkdir()
            for path in newer:
                path.rename(aside / path.name)
            write_json(self.root / POINTER, {"latest": chosen.name})
            names = ", ".join(path.name for path in newer)
            warnings.warn(f"resume={_index(chosen)}: newer {names} moved to {aside}", stacklevel=3)
        accelerator.wait_for_everyone()

    # ----------------------------------------------------------------------------- read

    def complete(self) -> list[Path]:
        """Folders that look like finished checkpoints (renamed into place), oldest first."""
        return complete_checkpoints(self.root)

    def _choose(self, which: int) -> tuple[Path, Manifest] | None:
        """The checkpoint to resume from, with its manifest, or None when there is none.
        Each is verified once per machine, every process taking the same verdict.

        ``which`` is -1 for the newest intact one (a damaged newest one is passed over with a
        warning naming the file), or a checkpoint index. Folders are only ever renamed into
        place complete, so the newest by index is what ``latest.json`` names; choosing by index
        still works when a crash came between the rename and the pointer.
        """
        candidates = self.complete()
        if which != -1:
            chosen = [p for p in candidates if _index(p) == which]
            if not chosen:
                available = [_index(p) for p in candidates]
                raise CheckpointError(
                    f"no checkpoint {which} under {self.root}; available: {available}"
                )
            return chosen[0], verified_on_this_machine(chosen[0], self.accelerator)
        problems = []
        for path in reversed(candidates):
            try:
                return path, verified_on_this_machine(path, self.accelerator)
            except CheckpointError as error:
                problems.append(f"{path.name}: {error}")
                warnings.warn(
                    f"skipping checkpoint {path.name}: {error}; falling back to the one before it",
                    stacklevel=3,
                )
        if problems:
            # Starting afresh here would train over the user's folder as if it were empty.
            raise CheckpointError(
                f"every checkpoint under {self.root} is damaged, so the run cannot resume:\n  "
                + "\n  ".join(problems)
                + "\nMove the folder away, or pass resume=False to start afresh (the damaged "
                "checkpoints are then moved aside, not deleted)."
            )
        return None


def _which(resume: bool | int | None) -> int:
    """The checkpoint ``resume`` names, -1 the newest (resume=1, == True, names checkpoint 1)."""
    return -1 if resume is None or resume is True else int(resume)


def _index(folder: Path) -> int:
    return int(folder.name.split("_")[1])
