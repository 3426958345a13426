"""Checkpoint folders: written whole or not at all, verified before they are trusted.

Layout under ``<model_path>/checkpoints``::

    checkpoint_000004/             one complete checkpoint
        accelerate/                Accelerate's save_state: model, optimizer, scheduler,
                                   scaler, RNGs (read back with weights_only=True)
        state.json                 the TrainingState
        callbacks.json             the callbacks' states
        trackers.json              the tracker runs a resume continues (MLflow, W&B)
        object_<i>.safetensors     each object given to Trainer.register_for_checkpointing
        process_<rank>.safetensors each process's loss accumulators
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
from pathlib import Path
from typing import Any

import attrs
import torch
from accelerate import Accelerator

from accmt_callbacks import CallbackHandler
from accmt_state import TrainingState, read_json, write_json

from .._errors import CheckpointError, TrainerConfigError
from ..config import option, positive_int
from ._background_writer import BackgroundWriter
from ._commit import POINTER, complete_checkpoints, guarded, place, settle
from ._folders import free_sibling, set_aside_folder
from ._manifest import ELSEWHERE, MANIFEST, SHARDED, check_compatible, verify
from ._parts import AccelerateSnapshot, Checkpointable, Parts, read_tracker_runs
from ._resize import (
    Start,
    check_position,
    merge_parts,
    parts_of,
    processes,
    refusal,
    resized_facts,
    seen_here,
)
from ._safe_tree import load_tree
from ._schedule import CheckpointSchedule, parse_checkpoint_every
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

    schedule: CheckpointSchedule | None = attrs.field(default=parse_checkpoint_every("epoch"))
    """When checkpoints are taken (``checkpoint_every``); None: never."""
    resume: bool | int | None = attrs.field(default=None, validator=_resume_value)
    """None resumes the newest checkpoint if any, True requires one, False starts afresh, an
    int picks one by index (-1: the newest)."""
    max_checkpoints: int | None = attrs.field(
        default=None, validator=option(positive_int, allow_none=True)
    )
    """Keep only the newest N checkpoints (None: all)."""
    checkpoint_async: bool = False
    """Write checkpoints in the background, the loop waiting only for a copy in memory."""

    @property
    def resumes(self) -> bool:
        """Whether a fit looks for a checkpoint to resume from."""
        return self.schedule is not None or self.resume is not None


class Checkpoints:
    """The checkpoints of one run, under ``root``: written, chosen, verified and read here.

    ``models``, ``optimizer`` and ``scheduler`` are what Accelerate prepared, in its order;
    a background write copies them (``background=True``).
    """

    def __init__(
        self,
        root: Path,
        accelerator: Accelerator,
        *,
        max_checkpoints: int | None,
        objects: Sequence[Checkpointable] = (),
        background: bool = False,
    ) -> None:
        self.root = root
        self.accelerator = accelerator
        self.max_checkpoints = max_checkpoints
        self.objects = list(objects)
        self.background = background
        self.writer = BackgroundWriter()
        self._buffers: AccelerateSnapshot | None = None
        self.tracker_runs: dict[str, str] = {}
        """The tracker runs (name -> run id) the next checkpoints record, for a resume."""
        kind = accelerator.distributed_type
        if background and kind in SHARDED:
            raise TrainerConfigError(
                f"Trainer(checkpoint_async=True) supports one device and DDP; {kind.value} "
                "writes its sharded state through its own path: use checkpoint_async=False"
            )

    # ---------------------------------------------------------------------------- write

    def save(
        self,
        index: int,
        facts: Mapping[str, Any],
        state: TrainingState,
        callbacks: CallbackHandler,
        process_state: Mapping[str, Any],
        snapshot_of: tuple[Sequence[torch.nn.Module], Any, Any] | None = None,
    ) -> None:
        """Write checkpoint ``index`` from every process. In the background, the call returns
        once everything is copied to CPU memory (``snapshot_of``: models, optimizer and
        scheduler); otherwise once the checkpoint is in place (its sync to the disk, and the
        removal of the oldest, go on in the background writer)."""
        self.writer.wait()
        accelerator = self.accelerator
        final = self.root / f"checkpoint_{index:06d}"
        temporary = self.root / f".tmp-{final.name}"
        if accelerator.is_main_process:
            self.root.mkdir(parents=True, exist_ok=True)
            shutil.rmtree(temporary, ignore_errors=True)
            temporary.mkdir()
        accelerator.wait_for_everyone()
        runs, copy = self.tracker_runs, self.background
        parts = Parts.of(state, callbacks, process_state, self.objects, runs, copy=copy)
        if self.background and snapshot_of is not None:
            snapshot = AccelerateSnapshot.take(accelerator, *snapshot_of, reuse=self._buffers)
            self._buffers = snapshot
            self.writer.start(lambda: self._write_later(temporary, final, facts, parts, snapshot))
            return
        with tied_weights_unannounced():
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
        facts: Mapping[str, Any],
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

    def find(self, resume: bool | int | None, facts: Mapping[str, Any]) -> Path | None:
        """The checkpoint this fit resumes from, per ``resume``; None to start afresh.

        None resumes the newest intact checkpoint when there is one, True requires one, False
        starts afresh, an int picks one by index (-1: the newest). Nothing is moved here: see
        :meth:`clear_way`.
        """
        if resume is False:
            return None
        found = self.choose(_which(resume))
        if found is None and resume is not None:
            raise CheckpointError(f"resume={resume!r}, but {self.root} holds no checkpoint")
        if found is None:
            return None
        check_compatible(found[1], facts, found[0])
        return found[0]

    def clear_way(self, resume: bool | int | None, chosen: Path | None) -> None:
        """Once the run's checks passed: ``resume=False`` moves the earlier checkpoints aside,
        ``resume=<index>`` those newer than ``chosen``; a failed start leaves them in place."""
        if resume is False:
            self.set_aside()
        elif chosen is not None and _which(resume) != -1:
            self.set_aside_newer(chosen)

    def start(self, resume: bool | int | None, facts: Mapping[str, Any], *, look: bool) -> Start:
        """Where this fit starts: afresh, or at the moment of the checkpoint ``resume`` names
        (when ``look``), mapped onto this run's number of processes."""
        folder = self.find(resume, facts) if look else None
        if folder is None:
            return Start(facts=resized_facts(facts, TrainingState(), self.root))
        state, process_state = self.load(folder, facts)
        made_on = read_json(folder / MANIFEST)["world_size"]
        return Start(
            facts=resized_facts(facts, state, folder / "state.json"),
            folder=folder,
            state=state,
            process_state=process_state,
            made_on=None if made_on == facts["world_size"] else made_on,
            tracker_runs=read_tracker_runs(folder),
        )

    def load(self, folder: Path, facts: Mapping[str, Any]) -> tuple[TrainingState, Any]:
        """The state, checked against the facts of the run that made it and moved to this
        run's position in the same data, and this process's own part of ``folder`` (those of
        the checkpoint's processes it takes over, on another number of processes)."""
        made = read_json(folder / MANIFEST)
        state = TrainingState.load(folder / "state.json")
        check_position(state, made, folder / "state.json")
        seen = seen_here(state, made, facts)
        cap = facts.get("max_steps")
        if seen is None and state.finished and cap is not None and state.global_step >= cap:
            # Finished at this run's max_steps: nothing is left to train, the moment is moot.
            read = state.batches_seen_in_epoch * made["world_size"] // facts["world_size"]
            seen = min(read, facts["batches_per_epoch"])
        if seen is None:
            earlier = self._earlier_that_fits(folder, facts)
            raise CheckpointError(
                f"checkpoint {folder} was made on {processes(made['world_size'])}, and this run "
                f"has {facts['world_size']}; {refusal(state, made, facts, earlier)}; or "
                f"{ELSEWHERE}."
            )
        state.batches_seen_in_epoch = state.train_step = seen
        rank, now_on = self.accelerator.process_index, facts["world_size"]
        parts = [_part(folder, old) for old in parts_of(rank, made["world_size"], now_on)]
        if len(parts) == 1:
            return state, parts[0]
        return state, merge_parts(parts, like=_part(folder, 0))

    def _earlier_that_fits(self, folder: Path, facts: Mapping[str, Any]) -> str | None:
        """``<index> (checkpoint_<index>, ...)`` of the newest checkpoint before ``folder``
        whose moment this run can start from, if any."""
        for path in reversed([p for p in self.complete() if _index(p) < _index(folder)]):
            try:
                made = read_json(path / MANIFEST)
                state = TrainingState.load(path / "state.json")
            except Exception:  # a damaged one is not offered
                continue
            if seen_here(state, made, facts) is not None:
                where = f"epoch {state.epoch}, step {state.global_step}"
                return f"{_index(path)} ({path.name}, {where})"
        return None

    def load_rest(self, folder: Path, callbacks: CallbackHandler) -> None:
        """The callbacks' states (into ``callbacks``, bound to the loaded state) and the
        registered objects' states."""
        states = read_json(folder / "callbacks.json")
        # accmt 2.0 kept each saving rule's patience as a callback; it lives in
        # state.patience_left now, which those checkpoints hold too.
        callbacks.load_state_dict(
            {key: value for key, value in states.items() if not key.startswith("RulePatience[")}
        )
        for index, target in enumerate(self.objects):
            path = folder / f"object_{index}.safetensors"
            if not path.exists():
                raise CheckpointError(
                    f"{path} is missing: the checkpoint holds fewer registered objects than the "
                    f"{len(self.objects)} given to register_for_checkpointing"
                )
            target.load_state_dict(load_tree(path))

    def load_accelerate(self, folder: Path) -> None:
        """Model, optimizer, scheduler, scaler and RNGs, through Accelerate's load_state,
        which reads them with ``weights_only=True``."""
        try:
            self.accelerator.load_state(str(folder / "accelerate"))
        except Exception as error:
            raise CheckpointError(f"{folder / 'accelerate'} cannot be loaded: {error}") from error

    def set_aside(self) -> None:
        """Move earlier checkpoints out of the way of a fresh run (``resume=False``)."""
        accelerator = self.accelerator
        if accelerator.is_main_process and self.complete():
            moved = set_aside_folder(self.root)
            warnings.warn(f"resume=False: earlier checkpoints moved to {moved}", stacklevel=3)
        accelerator.wait_for_everyone()

    def set_aside_newer(self, chosen: Path) -> None:
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

    def choose(self, which: int) -> tuple[Path, dict[str, Any]] | None:
        """The checkpoint to resume from, with its manifest, or None when there is none.

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
            return chosen[0], self.verify(chosen[0])
        problems = []
        for path in reversed(candidates):
            try:
                return path, self.verify(path)
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

    def verify(self, path: Path) -> dict[str, Any]:
        """The checkpoint's manifest, once every file is as it lists (see ``_manifest``)."""
        return verify(path)


def _which(resume: bool | int | None) -> int:
    """The checkpoint ``resume`` names, -1 the newest (resume=1, == True, names checkpoint 1)."""
    return -1 if resume is None or resume is True else int(resume)


def _index(folder: Path) -> int:
    return int(folder.name.split("_")[1])


def _part(folder: Path, rank: int) -> Any:
    """Process ``rank``'s own part of the checkpoint in ``folder``."""
    part = folder / f"process_{rank}.safetensors"
    if part.exists():
        return load_tree(part)
    # accmt 2.0 wrote it with torch.save; tensors and numbers only.
    return torch.load(folder / f"process_{rank}.pt", weights_only=True)
