"""What an offline W&B run wrote, read from its ``run-<id>.wandb`` file.

wandb 0.31 has no Python reader of these files any more (its Go core writes and syncs them), so
this reads their framing here and each record with wandb's own protobuf classes. The framing is
LevelDB's log format under a W&B header: blocks of 32 KiB, each record split into chunks of
``crc32c (4) | length (2, little-endian) | type (1: full, 2: first, 3: middle, 4: last)``, a
block's last bytes zero when no chunk header fits. A SIGKILLed run's file may end in the middle
of a chunk: what follows its last whole record is left out, as ``wandb sync`` would leave it.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
from wandb.proto import wandb_internal_pb2

_HEADER = b":W&B" + struct.pack("<HB", 0xBEE1, 0)
_BLOCK, _CHUNK = 32 * 1024, 7
_FULL, _FIRST, _LAST = 1, 2, 4


def records(path: Path) -> Iterator[Any]:
    """The records of one ``.wandb`` file, in the order they were written."""
    data = path.read_bytes()
    assert data[: len(_HEADER)] == _HEADER, f"{path} is not a W&B run file"
    position, pieces = len(_HEADER), b""
    while position + _CHUNK <= len(data):
        room = _BLOCK - position % _BLOCK
        if room < _CHUNK:
            position += room  # the block's zero padding
            continue
        _, length, kind = struct.unpack("<IHB", data[position : position + _CHUNK])
        start = position + _CHUNK
        if kind == 0 or start + length > len(data):
            return  # the end of what was flushed
        pieces = (b"" if kind in (_FULL, _FIRST) else pieces) + data[start : start + length]
        position = start + length
        if kind in (_FULL, _LAST):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pieces)
            yield record


@attrs.frozen
class OfflineRun:
    """One start of an offline run: its id, the step it rewinds its run to (W&B keeps the steps
    up to it, and the run goes on from the next), its configuration and its history
    ({value: {step: value}})."""

    run_id: str
    rewinds_to: float | None
    config: dict[str, Any]
    history: dict[str, dict[int, float]]

    @classmethod
    def read(cls, folder: Path) -> OfflineRun:
        (path,) = folder.glob("run-*.wandb")
        run_id, rewinds_to = "", None
        config: dict[str, Any] = {}
        history: dict[str, dict[int, float]] = {}
        for record in records(path):
            kind = record.WhichOneof("record_type")
            if kind == "run":
                run_id = record.run.run_id
                if record.run.HasField("branch_point"):
                    rewinds_to = record.run.branch_point.value
                config.update(_items(record.run.config.update))
            elif kind == "config":
                config.update(_items(record.config.update))
            elif kind == "history":
                step = record.history.step.num
                for name, value in _items(record.history.item).items():
                    if not name.startswith("_"):
                        history.setdefault(name, {})[step] = value
        return cls(run_id, rewinds_to, config, history)


def _items(items: Any) -> dict[str, Any]:
    return {
        item.key or "/".join(item.nested_key): json.loads(item.value_json)
        for item in items
        if item.value_json
    }


def synced_history(starts: list[OfflineRun], name: str) -> list[tuple[int, float]]:
    """``name``'s points in a run logged by ``starts`` (oldest first), as W&B keeps them once
    they are synced: a start that rewinds the run drops the points after its rewind step;
    without a rewind, a step that two starts logged is there twice."""
    kept: list[tuple[int, float]] = []
    for start in starts:
        if start.rewinds_to is not None:
            kept = [(step, value) for step, value in kept if step <= start.rewinds_to]
        kept += sorted(start.history.get(name, {}).items())
    return kept
