"""torch.distributed.checkpoint folders in a checkpoint, read without running code.

FSDP's sharded state dicts are written by torch.distributed.checkpoint (DCP): Accelerate's
``pytorch_model_fsdp_0/`` and ``optimizer_0/`` each hold a ``.metadata`` pickle, which maps
every entry of the state dict to a byte range of a ``__<rank>_<n>.distcp`` file, and those
files, each range a ``torch.save`` archive. DCP reads the metadata with ``pickle.load``, and
the ranges of entries that are not tensors (an optimizer's param groups) with
``torch.load(weights_only=False)``: a crafted file would run whatever it asks, on load.

So before a checkpoint is trusted, :func:`check_metadata` reads the metadata with an
unpickler that resolves only the classes DCP's metadata is made of (any other name is refused
before anything is called), checks what it read, and checks every byte range it names: in a
``.distcp`` file beside it, inside that file, and a torch archive that builds nothing but
tensors and plain values, found without running it (as the manifest checks a ``.bin``; the
environment can switch ``weights_only`` off, so it is not relied upon).
"""

from __future__ import annotations

import contextlib
import io
import os
import pathlib
import pickle
import zipfile
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import torch
from torch.distributed.checkpoint.filesystem import _StorageInfo
from torch.distributed.checkpoint.metadata import (
    _MEM_FORMAT_ENCODING,
    BytesStorageMetadata,
    ChunkStorageMetadata,
    Metadata,
    MetadataIndex,
    StorageMeta,
    TensorProperties,
    TensorStorageMetadata,
)

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

METADATA = ".metadata"
SHARD = ".distcp"
_ZIP = b"PK\x03\x04"  # how a zip archive, and so a torch.save archive, begins

_CLASSES: tuple[type[Any], ...] = (
    Metadata,
    TensorStorageMetadata,
    BytesStorageMetadata,
    ChunkStorageMetadata,
    TensorProperties,
    _MEM_FORMAT_ENCODING,
    StorageMeta,
    MetadataIndex,
    _StorageInfo,
    torch.Size,
    OrderedDict,
)
# StorageMeta.checkpoint_id: the folder DCP saved to, as the writer's Path.
_PATHS = (pathlib.PurePosixPath, pathlib.PosixPath, pathlib.PureWindowsPath, pathlib.WindowsPath)
_LAYOUTS = {str(value): value for value in vars(torch).values() if isinstance(value, torch.layout)}


def _layout(name: str) -> torch.layout:
    """A layout by its name: what ``torch.serialization._get_layout`` is pickled to do."""
    return _LAYOUTS[name]


# What a .metadata pickle may name, and nothing else: the classes above and paths (whose
# construction only parses strings), torch's dtypes (pickled by name; they cannot be called),
# and the look-up of a layout by its name, which resolves to this module's own.
_ALLOWED: dict[tuple[str, str], Any] = {
    **{(cls.__module__, cls.__qualname__): cls for cls in _CLASSES + _PATHS},
    **{("pathlib", cls.__qualname__): cls for cls in _PATHS},  # their module before 3.13
    **{
        ("torch", name): value
        for name, value in vars(torch).items()
        if isinstance(value, torch.dtype)
    },
    ("torch.serialization", "_get_layout"): _layout,
}


class _MetadataUnpickler(pickle.Unpickler):
    """An unpickler that resolves only the names in ``_ALLOWED``."""

    def find_class(self, module: str, name: str) -> Any:
        try:
            return _ALLOWED[(module, name)]
        except KeyError:
            raise pickle.UnpicklingError(
                f"it names {module}.{name}, which torch.distributed.checkpoint's metadata "
                "never holds; it was not loaded"
            ) from None

    def persistent_load(self, pid: Any) -> Any:
        raise pickle.UnpicklingError("it holds a persistent reference; it was not loaded")


def read_metadata(path: Path) -> Metadata:
    """The DCP metadata at ``path``, read without running code; ValueError when it is not
    one (its classes, or their fields, are not what DCP writes)."""
    try:
        with path.open("rb") as file:
            loaded = _MetadataUnpickler(file).load()
    except Exception as error:  # whatever a malformed pickle makes the unpickler raise
        raise ValueError(f"not a torch.distributed.checkpoint metadata pickle: {error}") from None
    if not isinstance(loaded, Metadata):
        raise ValueError(f"it holds a {type(loaded).__name__}, not DCP's Metadata")
    entries, storage = loaded.state_dict_metadata, loaded.storage_data
    if not isinstance(entries, dict) or not all(
        isinstance(key, str) and isinstance(value, (TensorStorageMetadata, BytesStorageMetadata))
        for key, value in entries.items()
    ):
        raise ValueError("its state_dict_metadata is not a dict of entries by name")
    if not isinstance(storage, dict) or not all(
        isinstance(key, MetadataIndex)
        and isinstance(key.fqn, str)
        and isinstance(value, _StorageInfo)
        for key, value in storage.items()
    ):
        raise ValueError("its storage_data is not a dict of byte ranges by entry")
    return loaded


def check_metadata(path: Path) -> None:
    """The DCP folder of the metadata at ``path`` is what DCP wrote: see the module's text.
    Raises ValueError saying what is not."""
    metadata = read_metadata(path)
    entries = metadata.state_dict_metadata
    shards: dict[str, BinaryIO] = {}
    with contextlib.ExitStack() as stack:
        for index, stored in metadata.storage_data.items():
            fqn, name = index.fqn, stored.relative_path
            if fqn not in entries:
                raise ValueError(f"entry {fqn!r} is stored but not described")
            if not isinstance(name, str) or Path(name).name != name or not name.endswith(SHARD):
                raise ValueError(f"entry {fqn!r} names {name!r}, not a {SHARD} file beside it")
            if stored.transform_descriptors:
                raise ValueError(
                    f"entry {fqn!r} is stored transformed ({stored.transform_descriptors}); "
                    "only DCP's plain layout is read"
                )
            if name not in shards:
                if not (path.parent / name).is_file():
                    raise ValueError(f"entry {fqn!r} is in {name}, which is missing")
                shards[name] = stack.enter_context((path.parent / name).open("rb"))
            _check_range(shards[name], stored.offset, stored.length, f"entry {fqn!r} in {name}")


def _check_range(file: BinaryIO, offset: Any, length: Any, what: str) -> None:
    """Bytes ``[offset, offset + length)`` of ``file`` are an archive of tensors and plain
    values: read without running it, as the manifest reads a ``.bin`` (``_manifest``)."""
    size = os.fstat(file.fileno()).st_size
    if not (type(offset) is int and type(length) is int and 0 <= offset <= size - length):
        raise ValueError(f"{what} lies outside its file ({offset!r}, {length!r}; {size} bytes)")
    archive = io.BufferedReader(_Range(file, offset, length))
    if archive.read(4) != _ZIP or not zipfile.is_zipfile(archive):
        raise ValueError(f"{what} is not a torch archive")
    archive.seek(0)
    try:
        unsafe = torch.serialization.get_unsafe_globals_in_checkpoint(archive)
    except Exception as error:
        raise ValueError(f"{what} is not a torch archive: {error}") from None
    if unsafe:
        raise ValueError(f"{what} would build {unsafe}, not only tensors and plain values")


class _Range(io.RawIOBase):
    """Bytes ``[offset, offset + length)`` of an open file, read as a file of their own."""

    def __init__(self, file: BinaryIO, offset: int, length: int) -> None:
        super().__init__()
        self.file, self.offset, self.length, self.position = file, offset, length, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.position

    def seek(self, position: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.position, io.SEEK_END: self.length}[whence]
        self.position = max(0, base + position)
        return self.position

    def readinto(self, buffer: WriteableBuffer) -> int:
        view = memoryview(buffer).cast("B")
        self.file.seek(self.offset + self.position)
        data = self.file.read(max(0, min(len(view), self.length - self.position)))
        view[: len(data)] = data
        self.position += len(data)
        return len(data)


def check_shard(path: Path) -> None:
    """A ``.distcp`` file lies in a DCP folder, whose metadata says what each of its byte
    ranges holds (checked with the metadata: :func:`check_metadata`)."""
    if not (path.parent / METADATA).is_file():
        raise ValueError(f"a {SHARD} file without the {METADATA} of its folder")
