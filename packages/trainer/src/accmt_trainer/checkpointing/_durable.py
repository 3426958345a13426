"""Making what was written survive a power cut: ``os.fsync`` of each file, then of the folders
that name them. A folder is synced after a rename into it, so that the rename itself lasts.

Checkpoints and best models sync the new version this way before the old one is removed, so
that at every moment one version a resume can verify is on the disk.
"""

from __future__ import annotations

import os
from pathlib import Path

# Windows flushes a file only through a handle opened for writing, and cannot open a folder.
_FILE = os.O_RDWR | getattr(os, "O_BINARY", 0) if os.name == "nt" else os.O_RDONLY
_FOLDER = getattr(os, "O_DIRECTORY", None)


def sync_file(path: Path) -> None:
    """The file's data and size, on the disk."""
    _sync(path, _FILE)


def sync_folder(path: Path) -> None:
    """The folder's entries (files created or renamed into it), on the disk; POSIX only."""
    if _FOLDER is not None:
        _sync(path, os.O_RDONLY | _FOLDER)


def sync_tree(folder: Path) -> None:
    """Every file under ``folder``, then every folder under it, each before the folder that
    holds it, ``folder`` last."""
    folders = []
    for parent, _, files in os.walk(folder):
        for name in files:
            sync_file(Path(parent, name))
        folders.append(Path(parent))
    for path in reversed(folders):
        sync_folder(path)


def _sync(path: Path, flags: int) -> None:
    descriptor = os.open(path, flags)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
