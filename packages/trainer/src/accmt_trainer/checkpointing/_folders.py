"""The folders a run writes: checked writable before anything is written, and moved whole into
place so that, at every moment, one complete version exists."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path

from .._errors import TrainerConfigError
from ._durable import sync_folder, sync_tree


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
    """Put ``staging`` where ``folder`` is; at every moment one complete version exists, and
    the new one is on the disk (its files, itself, the renames) before the old one is removed."""
    sync_tree(staging)
    previous = set_aside_folder(folder)
    staging.rename(folder)
    sync_folder(folder.parent)
    if previous is not None:
        shutil.rmtree(previous, ignore_errors=True)


def recover_folder(folder: Path, staging: Path, complete: str) -> None:
    """Undo what a kill inside :func:`replace_folder` left: a ``staging`` that holds
    ``complete`` is the newer version and goes into place; otherwise the set-aside copy comes
    back. Leftover set-aside copies go once ``folder`` is whole again."""
    aside = sorted(folder.parent.glob(f"{folder.name}.old-*"))
    if not folder.exists():
        if (staging / complete).exists():
            staging.rename(folder)
        elif aside:
            aside.pop().rename(folder)
    if folder.exists():
        sync_folder(folder.parent)
        for old in aside:
            shutil.rmtree(old, ignore_errors=True)


def check_writable(folders: Iterable[tuple[str, Path]], owner: str = "Trainer") -> None:
    """Each ``(option, folder)`` of ``owner`` can be made and written to, by this process."""
    for option, folder in folders:
        try:
            folder.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=folder, prefix=".accmt-write-test-"):
                pass
        except OSError as error:
            raise TrainerConfigError(
                f"{owner}({option}={str(folder)!r}): the folder cannot be written: {error}"
            ) from error
