"""One run per output folder: an exclusive lock held for the whole ``fit``.

The lock is ``filelock``'s, an OS lock on ``<folder>/.accmt.lock`` that dies with its process,
so a run killed by SIGKILL never blocks the next. The holder's host and PID are written beside
it, for the error that a second run gets. On several processes the main process takes the
lock and tells the others whether it got it. A fit that never started training leaves the
lock's files as they were (``keep_files``): removed if it made them, the holder's put back.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import socket
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from accelerate import Accelerator
from accelerate.utils import broadcast_object_list
from filelock import FileLock, Timeout

from .._errors import FolderInUseError

LOCK = ".accmt.lock"
HOLDER = ".accmt.lock.holder.json"


class FolderLock:
    """``keep_files()`` is asked when the lock is released: False puts the lock's files back as
    they were before (a run that trained nothing), while still holding it. Without it the
    files are kept."""

    def __init__(
        self,
        folder: Path,
        accelerator: Accelerator,
        keep_files: Callable[[], bool] | None = None,
    ) -> None:
        self.folder = folder
        self.accelerator = accelerator
        self.keep_files = keep_files
        self._lock = FileLock(folder / LOCK, timeout=0)
        self._made_lock_file = False
        self._holder_before: bytes | None = None

    def __enter__(self) -> FolderLock:
        refusal = self._acquire() if self.accelerator.is_main_process else ""
        answer = [refusal]
        if self.accelerator.num_processes > 1:
            broadcast_object_list(answer, from_process=0)
        if answer[0]:
            raise FolderInUseError(answer[0])
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._lock.is_locked:
            if self.keep_files is not None and not self.keep_files():
                self._undo()
            self._lock.release()

    def _undo(self) -> None:
        """The lock's files as they were before it was taken (while it is still held)."""
        holder = self.folder / HOLDER
        if self._holder_before is None:
            holder.unlink(missing_ok=True)
        else:
            holder.write_bytes(self._holder_before)
        if self._made_lock_file:
            (self.folder / LOCK).unlink(missing_ok=True)

    def _acquire(self) -> str:
        """ "" once the lock is held, else why not."""
        self.folder.mkdir(parents=True, exist_ok=True)
        made_lock_file = not (self.folder / LOCK).exists()
        try:
            self._lock.acquire()
        except Timeout:
            return (
                f"Trainer(model_path={str(self.folder)!r}): another run is using this folder "
                f"({_holder(self.folder)}); wait for it to end, or give this run another "
                "model_path"
            )
        holder = {
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "since": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        }
        self._made_lock_file = made_lock_file
        with contextlib.suppress(OSError):
            self._holder_before = (self.folder / HOLDER).read_bytes()
        (self.folder / HOLDER).write_text(json.dumps(holder), encoding="utf-8")
        return ""


def _holder(folder: Path) -> str:
    try:
        holder = json.loads((folder / HOLDER).read_text(encoding="utf-8"))
        return f"host {holder['host']}, PID {holder['pid']}, since {holder['since']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "holder unknown"
