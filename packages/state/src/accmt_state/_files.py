"""JSON files written atomically and durably, and read with errors that name the file."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
from pathlib import Path
from typing import Any

from ._converter import converter, decode_nonfinite
from ._errors import StateError

# Windows opens files in text mode unless told otherwise; elsewhere the flag does not exist.
_WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)


def write_json(path: str | os.PathLike[str], data: Any, *, durable: bool = True) -> None:
    """Write ``data``, unstructured by the package's converter, as strict JSON to ``path``.

    Atomic: the bytes go to a temporary file in the same folder, renamed over ``path``. A
    process killed at any moment leaves either the old file or the new one, never a mix. (A
    kill can leave the hidden ``.<name>.<pid>.<token>.tmp`` file behind; it is never read.)
    Durable unless ``durable=False``: the file and the folder are fsynced, so the new file
    survives a power cut too. A caller that verifies what it reads back (a checkpoint with
    digests) may skip it: on many filesystems an fsync also waits for every other file
    written just before.
    """
    text = json.dumps(converter.unstructure(data), allow_nan=False, indent=2) + "\n"
    _replace_atomically(Path(path), text.encode("utf-8"), durable)


def read_json(path: str | os.PathLike[str]) -> Any:
    """The JSON value in ``path``, with tagged non-finite floats read back as floats.

    Bare ``Infinity``, ``-Infinity`` and ``NaN`` are accepted too, as Python's ``json`` module
    wrote them in accmt 1.x. Raises StateError naming the file when it cannot be read, is empty,
    is not UTF-8, or is not JSON (a truncated file among them).
    """
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise StateError(f"cannot read the file ({exc.strerror or exc})", file=path) from exc
    if not raw.strip():
        raise StateError("the file is empty", file=path)
    try:
        return json.loads(raw.decode("utf-8"), object_hook=decode_nonfinite)
    except (ValueError, RecursionError) as exc:
        raise StateError(f"not valid JSON ({exc})", file=path) from exc


def _replace_atomically(path: Path, payload: bytes, durable: bool = True) -> None:
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    # 0o666 lets the umask decide the final file's permissions, as a plain open() would.
    descriptor = os.open(temporary, _WRITE_FLAGS, 0o666)
    try:
        with os.fdopen(descriptor, "wb") as file:
            file.write(payload)
            file.flush()
            if durable:
                os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    if durable:
        _fsync_folder(path.parent)


def _fsync_folder(folder: Path) -> None:
    """Make the rename itself durable. Only POSIX can open a folder to fsync it."""
    if not hasattr(os, "O_DIRECTORY"):
        return
    descriptor = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
