"""A fit that fails before its first step (a sanity check, an option found wrong at ``fit``)
leaves its folders as it found it: the folders it made for the run (``model_path``,
``logging_dir`` and their missing parents) go again, once empty. The lock's own files go with
the lock (``FolderLock``); nothing else is written before the first step."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path


def missing_folders(folders: Iterable[Path]) -> list[Path]:
    """The folders that making ``folders`` would make, deepest first."""
    missing: set[Path] = set()
    for folder in folders:
        folder = folder.absolute()
        while not folder.exists() and folder != folder.parent:
            missing.add(folder)
            folder = folder.parent
    return sorted(missing, key=lambda path: len(path.parts), reverse=True)


@contextlib.contextmanager
def untouched_unless(started: Callable[[], bool], folders: Iterable[Path]) -> Iterator[None]:
    """Around a fit's start: when the block ends and ``started()`` is still False, the folders
    among ``folders`` (and their parents) that did not exist before are removed, each only if
    it is empty: what anything else put there stays."""
    made = missing_folders(folders)
    try:
        yield
    finally:
        if not started():
            for folder in made:
                with contextlib.suppress(OSError):
                    folder.rmdir()
