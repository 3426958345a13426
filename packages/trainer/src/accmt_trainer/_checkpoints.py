"""Checkpoint folders: written whole or not at all, verified before they are trusted.

Layout under ``<model_path>/checkpoints``::

    checkpoint_000004/       one complete checkpoint
        accelerate/          Accelerate's save_state: model, optimizer, scheduler, scaler, RNGs
        state.json           the TrainingState
        callbacks.json       the callbacks' states
        process_<rank>.pt    each process's loss accumulators
        manifest.json        written last: versions, world size, every file's size and sha256
    latest.json              which checkpoint is newest, replaced atomically after each save
    .tmp-checkpoint_000005/  a checkpoint being written; never read, removed on the next save

Every process writes into the temporary folder; once all have finished, the main process
writes the manifest, renames the folder into place and moves the pointer.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import re
import shutil
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from accelerate import Accelerator

from accmt_callbacks import CallbackHandler
from accmt_state import StateError, TrainingState, read_json, write_json

from ._errors import CheckpointError
from ._folders import free_sibling, set_aside_folder

MANIFEST = "manifest.json"
POINTER = "latest.json"
_NAME = re.compile(r"^checkpoint_(\d{6})$")


class Checkpoints:
    """The checkpoints of one run, under ``root``: written, chosen, verified and read here."""

    def __init__(self, root: Path, accelerator: Accelerator, max_checkpoints: int | None) -> None:
        self.root = root
        self.accelerator = accelerator
        self.max_checkpoints = max_checkpoints

    # ---------------------------------------------------------------------------- write

    def save(
        self,
        index: int,
        run: Mapping[str, Any],
        state: TrainingState,
        callbacks: CallbackHandler,
        process_state: Mapping[str, Any],
    ) -> Path:
        """Write checkpoint ``index`` from every process; returns its folder.

        ``process_state`` is this process's own part (tensors and numbers), written with
        ``torch.save`` and read back with ``weights_only=True``.
        """
        accelerator = self.accelerator
        final = self.root / f"checkpoint_{index:06d}"
        temporary = self.root / f".tmp-{final.name}"
        if accelerator.is_main_process:
            self.root.mkdir(parents=True, exist_ok=True)
            shutil.rmtree(temporary, ignore_errors=True)
            temporary.mkdir()
        accelerator.wait_for_everyone()
        accelerator.save_state(str(temporary / "accelerate"))
        torch.save(dict(process_state), temporary / f"process_{accelerator.process_index}.pt")
        if accelerator.is_main_process:
            state.save(temporary / "state.json")
            callbacks.save_state(temporary / "callbacks.json")
        accelerator.wait_for_everyone()
        if accelerator.is_main_process:
            write_json(
                temporary / MANIFEST, {**run, "index": index, "files": _inventory(temporary)}
            )
            shutil.rmtree(final, ignore_errors=True)
            temporary.rename(final)
            write_json(self.root / POINTER, {"latest": final.name})
            self._retain()
        accelerator.wait_for_everyone()
        return final

    # ------------------------------------------------------------------------- resume

    def find(self, resume: bool | int | None, run: Mapping[str, Any]) -> Path | None:
        """The checkpoint this fit resumes from, per ``resume``; None to start afresh.

        None resumes the newest intact checkpoint when there is one, True requires one, False
        moves earlier ones aside, an int picks one by index (-1: the newest).
        """
        if resume is False:
            self.set_aside()
            return None
        # Not `in (None, True)`: resume=1 (== True) names checkpoint 1.
        which = -1 if resume is None or resume is True else int(resume)
        found = self.choose(which)
        if found is None and resume is not None:
            raise CheckpointError(f"resume={resume!r}, but {self.root} holds no intact checkpoint")
        if found is None:
            return None
        check_compatible(found[1], run, found[0])
        if which != -1:
            self.set_aside_newer(found[0])
        return found[0]

    def load(self, folder: Path) -> tuple[TrainingState, Any]:
        """The state and this process's own part of checkpoint ``folder``."""
        state = TrainingState.load(folder / "state.json")
        part = folder / f"process_{self.accelerator.process_index}.pt"
        return state, torch.load(part, weights_only=True)

    def load_callbacks(self, folder: Path, callbacks: CallbackHandler) -> None:
        """The callbacks' states, into ``callbacks`` once it is bound to the loaded state."""
        callbacks.load_state(folder / "callbacks.json")

    def load_accelerate(self, folder: Path) -> None:
        """Model, optimizer, scheduler, scaler and RNGs, through Accelerate's load_state."""
        self.accelerator.load_state(str(folder / "accelerate"))

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
        newer = [path for path in self.complete() if path.name > chosen.name]
        if accelerator.is_main_process and newer:
            aside = free_sibling(self.root)
            aside.mkdir()
            for path in newer:
                path.rename(aside / path.name)
            write_json(self.root / POINTER, {"latest": chosen.name})
            names = ", ".join(path.name for path in newer)
            warnings.warn(f"resume={_index(chosen)}: newer {names} moved to {aside}", stacklevel=3)
        accelerator.wait_for_everyone()

    def _retain(self) -> None:
        if self.max_checkpoints is None:
            return
        for old in self.complete()[: -self.max_checkpoints]:
            shutil.rmtree(old, ignore_errors=True)

    # ----------------------------------------------------------------------------- read

    def complete(self) -> list[Path]:
        """Folders that look like finished checkpoints (renamed into place), oldest first."""
        if not self.root.is_dir():
            return []
        return sorted(p for p in self.root.iterdir() if _NAME.match(p.name) and p.is_dir())

    def choose(self, which: int) -> tuple[Path, dict[str, Any]] | None:
        """The checkpoint to resume from, with its manifest, or None when there is none.

        ``which`` is -1 for the newest intact one (a corrupt newest one is passed over with a
        warning), or a checkpoint index. Folders are only ever renamed into place complete, so
        the newest by index is what ``latest.json`` names; the pointer is for people and tools,
        and choosing by index still works when a crash came between the rename and the pointer.
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
        """The checkpoint's manifest, once every file it lists has its size and checksum."""
        try:
            manifest: dict[str, Any] = read_json(path / MANIFEST)
        except StateError as error:
            raise CheckpointError(f"its manifest is missing or unreadable ({error})") from error
        files = manifest.get("files")
        if not isinstance(files, dict) or not files:
            raise CheckpointError("its manifest lists no files")
        for name, expected in files.items():
            found = _describe(path / name) if (path / name).is_file() else None
            if found != expected:
                raise CheckpointError(f"{name} is missing, truncated or altered")
        return manifest


def _inventory(folder: Path) -> dict[str, dict[str, Any]]:
    return {
        str(path.relative_to(folder)): _describe(path)
        for path in sorted(folder.rglob("*"))
        if path.is_file() and path.name != MANIFEST
    }


def _describe(path: Path) -> dict[str, Any]:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return {"size": path.stat().st_size, "sha256": digest.hexdigest()}


def _index(folder: Path) -> int:
    return int(folder.name.split("_")[1])


def package_versions() -> dict[str, str]:
    """Versions of the packages a checkpoint's contents depend on."""
    names = ("accmt-trainer", "accmt-state", "accmt-callbacks", "accmt-metrics", "torch",
             "accelerate")  # fmt: skip
    versions = {}
    for name in names:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = "unknown"
    return versions


def check_compatible(manifest: Mapping[str, Any], run: Mapping[str, Any], path: Path) -> None:
    """Refuse a checkpoint whose data position cannot be mapped onto this run exactly."""
    for key in ("world_size", "train_batch_size", "grad_accumulation_steps", "batches_per_epoch"):
        if manifest.get(key) != run[key]:
            raise CheckpointError(
                f"checkpoint {path} was made with {key}={manifest.get(key)!r}, but this run has "
                f"{key}={run[key]!r}; the position within the epoch cannot be mapped exactly. "
                "Resume with the same settings, or pass resume=False to start afresh."
            )
