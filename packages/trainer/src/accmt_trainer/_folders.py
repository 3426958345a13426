"""Moving whole folders into place so that, at every moment, one complete version exists."""

from __future__ import annotations

import shutil
from pathlib import Path


def free_sibling(folder: Path) -> Path:
    """The first ``<name>.old-<n>`` beside ``folder`` that does not exist yet."""
    n = 1
    while (target := folder.with_name(f"{folder.name}.old-{n}")).exists():
        n += 1
    return target


def set_aside_folder(folder: Path) -> Path | None:
    """Rename ``folder`` to a free ``<name>.old-<n>`` beside it; nothing is deleted."""
    if not folder.exists():
        return None
    target = free_sibling(folder)
    folder.rename(target)
    return target


def replace_folder(staging: Path, folder: Path) -> None:
    """Put ``staging`` where ``folder`` is; at every moment one complete version exists."""
    previous = set_aside_folder(folder)
    staging.rename(folder)
    if previous is not None:
        shutil.rmtree(previous, ignore_errors=True)
