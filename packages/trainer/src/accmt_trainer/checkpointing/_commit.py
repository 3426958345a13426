"""The end of a checkpoint's write, which the main process does once every process's files are
written, in two halves. :func:`place`, on the training loop's path: the digests and the
manifest, then the rename into place; from then on a resume finds the checkpoint, and a process
killed at any moment leaves one that verifies. :func:`settle`, in the background writer, off
the loop's path: the sync of the checkpoint's files and folders and of the rename, the
pointer, and only then the removal of checkpoints past ``max_checkpoints``.

A machine that loses power before the sync may leave the newest checkpoint incomplete on the
disk, but not alone: the one before it is removed only once the new one is synced, and a
resume that finds the newest damaged (its digests disagree) falls back to it.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from pathlib import Path

from accmt_state import write_json

from .._errors import CheckpointError
from ._durable import sync_folder, sync_tree
from ._manifest import inventory
from ._run_facts import MANIFEST, Manifest, RunFacts, manifest_to_json

POINTER = "latest.json"
_NAME = re.compile(r"^checkpoint_(\d{6,})$")


def checkpoint_index(folder: Path) -> int:
    return int(folder.name.split("_")[1])


def complete_checkpoints(root: Path) -> list[Path]:
    """Folders under ``root`` that look like finished checkpoints (renamed into place), oldest
    first."""
    if not root.is_dir():
        return []
    found = [p for p in root.iterdir() if _NAME.match(p.name) and p.is_dir()]
    return sorted(found, key=checkpoint_index)


def guarded(temporary: Path, write: Callable[[], object]) -> None:
    """``write`` into the temporary folder; on failure the folder goes and CheckpointError
    says that the earlier checkpoints are kept."""
    try:
        write()
    except Exception as error:  # a full disk comes as OSError, or as safetensors' own
        shutil.rmtree(temporary, ignore_errors=True)
        raise CheckpointError(
            f"could not write the checkpoint into {temporary}: {error}; the earlier "
            "checkpoints are kept as they were"
        ) from error


def place(temporary: Path, final: Path, facts: RunFacts) -> None:
    """Main process, on the loop's path: manifest, then the rename into place."""
    manifest = Manifest(facts=facts, index=checkpoint_index(final), files=inventory(temporary))
    data = manifest_to_json(manifest)
    # Synced with the rest, by settle().
    guarded(temporary, lambda: write_json(temporary / MANIFEST, data, durable=False))
    shutil.rmtree(final, ignore_errors=True)
    temporary.rename(final)


def settle(final: Path, keep: int | None) -> None:
    """Main process, off the loop's path: the placed checkpoint onto the disk (its files and
    folders, then the root folder, which makes the rename last), the pointer, then retention."""
    root = final.parent
    sync_tree(final)
    sync_folder(root)
    try:
        write_json(root / POINTER, {"latest": final.name})  # durable: synced, then the root
    except OSError as error:
        raise CheckpointError(
            f"checkpoint {final.name} is complete, but {root / POINTER} could not be "
            f"written: {error}. A resume finds checkpoints by index, so it is still found."
        ) from error
    retain(root, keep)


def retain(root: Path, keep: int | None) -> None:
    """Remove all but the newest ``keep`` checkpoints (None: keep them all)."""
    if keep is None:
        return
    for old in complete_checkpoints(root)[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
