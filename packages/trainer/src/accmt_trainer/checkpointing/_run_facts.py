"""The run's facts and a checkpoint's manifest: attrs records, which accmt-state's strict
cattrs converter writes as the manifest's JSON and reads back, naming the field that is wrong.

The facts are what a checkpoint must agree with to resume exactly (the number of processes,
the batches, the accumulation, the stages), the versions that made it, and the offsets between
the run's counters and what this number of processes would count from its first step
(``_resize``). The manifest is the facts, flat, with the checkpoint's index and the size and
digest of every file it holds (``_manifest``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import cattrs

from accmt_state import StateError, converter, read_json

from .._errors import CheckpointError

MANIFEST = "manifest.json"
DIGEST = "xxh3_128"
FORMAT = 2
"""The manifest's layout; a checkpoint of another format is refused by name."""


@attrs.frozen(kw_only=True)
class RunFacts:
    """What a checkpoint records of the run that made it; a resume compares them with its own."""

    world_size: int
    """The number of processes."""
    train_batch_size: int
    """Samples per training batch on each process."""
    grad_accumulation_steps: int
    batches_per_epoch: int | None
    """Batches of an epoch on each process; None for a stream without a length."""
    order_batches: int | None
    """Batches of the one order Accelerate deals out to the processes, where it can be read
    (``data.order_batches``): a resume on another number of processes needs it."""
    stages: tuple[tuple[int, int], ...] | None = None
    """A curriculum's ``(end step, batches of a pass)`` per stage, or None."""
    sharded: bool = False
    """Whether model and optimizer state is split by process (FSDP, DeepSpeed)."""
    sharding: str | None = None
    """How it is split, where it is: ``"FSDP2 SHARDED_STATE_DICT"`` (FSDP's version and state
    dict type) or the distributed type (``"DEEPSPEED"``); None for whole state, and in a
    checkpoint that predates its recording. Only FSDP2's sharded state dicts resume on another
    number of processes (torch.distributed.checkpoint reshards them: ``_manifest``)."""
    stream: str | None = None
    """The training stream's name (its type's), or None for a map-style dataset. Not
    compared: a resume on another number of processes that cannot find the checkpoint's
    moment in it names it."""
    max_steps: int | None = None
    """Not compared: it tells whether a finished run has anything left to train here."""
    versions: Mapping[str, str] = attrs.field(factory=dict)
    """The versions of the packages the checkpoint's contents depend on."""
    step_offset: int = 0
    """This run's ``global_step`` minus what its number of processes counts from step 0."""
    iteration_offset: int = 0
    """The same for ``batch_iteration``."""
    format: int = FORMAT

    def with_offsets(self, step_offset: int, iteration_offset: int) -> RunFacts:
        return attrs.evolve(self, step_offset=step_offset, iteration_offset=iteration_offset)


@attrs.frozen(kw_only=True)
class FileEntry:
    """One file of a checkpoint as its manifest lists it."""

    size: int
    xxh3_128: str


@attrs.frozen(kw_only=True)
class Manifest:
    """A checkpoint's manifest: the run's facts, the checkpoint's index, and every file."""

    facts: RunFacts
    index: int
    files: Mapping[str, FileEntry]
    digest: str = DIGEST


_converter = converter.copy()
_facts_fields = {field.name for field in attrs.fields(RunFacts)}


def _structure_manifest(data: Any, _: type) -> Manifest:
    if not isinstance(data, dict):
        raise CheckpointError(f"expected a JSON object, got {type(data).__name__}")
    facts = {key: value for key, value in data.items() if key in _facts_fields}
    rest = {key: value for key, value in data.items() if key not in _facts_fields}
    structured_facts = _converter.structure(facts, RunFacts)
    return Manifest(facts=structured_facts, **_structure_rest(rest))


def _structure_rest(rest: dict[str, Any]) -> dict[str, Any]:
    known = {"index", "files", "digest"}
    extra = sorted(set(rest) - known)
    if extra:
        raise CheckpointError(f"unknown key {extra[0]!r}")
    for key in ("index", "files"):
        if key not in rest:
            raise CheckpointError(f"required field missing @ $.{key}")
    files = _converter.structure(rest["files"], dict[str, FileEntry])
    digest = _converter.structure(rest.get("digest", DIGEST), str)
    return {"index": _converter.structure(rest["index"], int), "files": files, "digest": digest}


def manifest_to_json(manifest: Manifest) -> dict[str, Any]:
    """The manifest as its file holds it: the facts, flat, beside the index and the files."""
    return {
        **_converter.unstructure(manifest.facts),
        "index": manifest.index,
        "digest": manifest.digest,
        "files": _converter.unstructure(manifest.files),
    }


_converter.register_structure_hook(Manifest, _structure_manifest)
_converter.register_unstructure_hook(Manifest, manifest_to_json)


def read_manifest(folder: Path) -> Manifest:
    """The manifest of the checkpoint in ``folder``; CheckpointError naming what is wrong in it
    (the field, by cattrs' path) when it cannot be read as one of this format."""
    path = folder / MANIFEST
    try:
        data = read_json(path)
    except StateError as error:
        raise CheckpointError(f"its manifest is missing or unreadable ({error})") from error
    if isinstance(data, dict) and data.get("format", FORMAT) != FORMAT:
        raise CheckpointError(
            f"{path}: format {data.get('format')!r}, where this accmt-trainer reads {FORMAT}"
        )
    try:
        return _structure_manifest(data, Manifest)
    except cattrs.BaseValidationError as error:
        lines = "; ".join(cattrs.transform_error(error))
        raise CheckpointError(f"{path} is not a manifest of this accmt-trainer: {lines}") from error
    except (CheckpointError, StateError, TypeError, ValueError) as error:
        raise CheckpointError(f"{path} is not a manifest of this accmt-trainer: {error}") from error
