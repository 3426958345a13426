"""The end of a checkpoint's write, which the main process does once every process's files are
written: the digests and the manifest, the sync of it all, the rename into place, the pointer,
and only then the removal of checkpoints past ``max_checkpoints``.

Until the rename the earlier checkpoints are the run's, and the new one is on the disk (its
files, its folders, the rename, the pointer) before any of them is removed: a process killed,
or a machine that loses power, at any moment leaves a checkpoint that verifies.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from accmt_state import write_json

from ._durable import sync_tree
from ._errors import CheckpointError
from ._manifest import DIGEST, MANIFEST, inventory

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


def commit(temporary: Path, final: Path, facts: Mapping[str, Any], keep: int | None) -> None:
    """Main process: manifest, sync, rename into place, pointer, then retention."""
    manifest = {**facts, "index": checkpoint_index(final), "digest": DIGEST}
    manifest["files"] = inventory(temporary)
    # Synced with the rest, below.
    guarded(temporary, lambda: write_json(temporary / MANIFEST, manifest, durable=False))
    guarded(temporary, lambda: sync_tree(temporary))
    root = final.parent
    shutil.rmtree(final, ignore_errors=True)
    temporary.rename(final)
    try:
        # Durable: the pointer is synced, then the root folder, which makes the rename last.
        write_json(root / POINTER, {"latest": final.name})
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
