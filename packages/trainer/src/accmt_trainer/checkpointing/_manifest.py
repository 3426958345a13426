"""A checkpoint's manifest: what it must hold, byte for byte, before anything in it is read.

The manifest (``_run_facts``) lists every file with its size and digest (xxh3-128, computed by
threads over the files just written, while they are still in the page cache). A checkpoint whose
files differ in any way from the list (a file missing, added, resized or altered, or not of the
kind its name says) is not trusted. A resume verifies it once per machine
(:func:`verified_on_this_machine`): the machine's local main process reads and checks every
file, and the machine's other processes take its verdict.
"""

from __future__ import annotations

import functools
import importlib.metadata
import json
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

import torch
import xxhash
from accelerate.utils import DistributedType, gather_object, load
from safetensors import safe_open

from accmt_state import StateError, TrainingState

from .._errors import CheckpointError, TrainerError
from ..console import processes
from ._run_facts import DIGEST, MANIFEST, FileEntry, Manifest, RunFacts, read_manifest

if TYPE_CHECKING:
    from accelerate import Accelerator

    from ..data import EpochPlan

_BLOCK = 1 << 22
# Accelerate's RNG states: torch.save archives it loads with weights_only=True.
_RNG_FILES = "random_states_"
# The files of a torch.distributed.checkpoint folder (FSDP's sharded state dicts), checked by
# ``_dcp``: imported only for a checkpoint that holds them, as it imports that package.
_DCP_METADATA, _DCP_SHARD = ".metadata", ".distcp"
# Distributed types whose model and optimizer state is split by process.
SHARDED = {
    DistributedType.FSDP,
    DistributedType.DEEPSPEED,
    DistributedType.MEGATRON_LM,
    DistributedType.XLA,
}
# The sharding whose state torch.distributed.checkpoint reshards on load (Accelerate's FSDP2
# load passes DCP the state dict this run's shards make): it resumes on another number of
# processes, the training state mapped by ``_resize`` as for whole state.
RESHARDED = "FSDP2 SHARDED_STATE_DICT"


def inventory(folder: Path) -> dict[str, FileEntry]:
    """Every file under ``folder`` but the manifest, with its size and digest."""
    paths = [p for p in sorted(folder.rglob("*")) if p.is_file() and p.name != MANIFEST]
    with ThreadPoolExecutor(max_workers=4) as pool:
        described = list(pool.map(describe, paths))
    return {str(p.relative_to(folder)): entry for p, entry in zip(paths, described, strict=True)}


def describe(path: Path) -> FileEntry:
    digest = xxhash.xxh3_128()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(_BLOCK), b""):
            digest.update(block)
    return FileEntry(size=path.stat().st_size, xxh3_128=digest.hexdigest())


def verify(folder: Path) -> Manifest:
    """The checkpoint's manifest, once every file it lists, and no other, has its size, digest
    and kind. Raises CheckpointError naming the first file that does not."""
    manifest = read_manifest(folder)
    files = manifest.files
    if not files or manifest.digest != DIGEST:
        raise CheckpointError(f"its manifest lists no files with {DIGEST} digests")
    present = {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()}
    unlisted = sorted(present - set(files) - {MANIFEST})
    if unlisted:
        raise CheckpointError(f"{unlisted[0]} is not listed in its manifest")
    for name, expected in files.items():
        path = folder / name
        found = describe(path) if path.is_file() else None
        if found != expected:
            raise CheckpointError(f"{name} is missing, truncated or altered")
        _check_kind(path, name)
    return manifest


def verified_on_this_machine(folder: Path, accelerator: Accelerator) -> Manifest:
    """The checkpoint's manifest, once this machine's local main process has verified the
    folder (:func:`verify`: every file read and hashed, and checked without running code);
    the machine's other processes wait for its verdict and read the manifest alone. Each
    machine verifies its own view of the folder, as machines need not share a file system.
    A damaged checkpoint raises the same CheckpointError, naming the file, on every process.

    The verdicts meet in one gather over the run's process group (every process takes part,
    as in every call of this function: the local main processes' verdicts, the others'
    blanks); a machine's processes have consecutive ranks from its local main's, as torchrun
    and Accelerate's launchers number them."""
    if accelerator.num_processes == 1 or accelerator.distributed_type == DistributedType.XLA:
        return verify(folder)  # one process, or no object gather (XLA): each verifies
    verdict: tuple[str, str] = ("", "")
    failure: Exception | None = None
    manifest = None
    if accelerator.is_local_main_process:
        try:
            manifest = verify(folder)
        except Exception as error:  # the other processes must hear of any, not wait for it
            failure = error
            verdict = ("damaged" if isinstance(error, CheckpointError) else "failed", str(error))
    verdicts = gather_object([verdict])
    kind, message = verdicts[accelerator.process_index - accelerator.local_process_index]
    if failure is not None:
        raise failure
    if kind == "damaged":
        raise CheckpointError(message)
    if kind == "failed":
        raise TrainerError(f"{folder} could not be verified on this machine: {message}")
    return manifest if manifest is not None else read_manifest(folder)


def _check_kind(path: Path, name: str) -> None:
    """The file is what its name says: JSON, safetensors, a torch zip archive (which
    Accelerate and this package read with ``weights_only=True``), or a file of a
    torch.distributed.checkpoint folder (FSDP's sharded state dicts: ``_dcp``)."""
    suffix = path.suffix
    try:
        if path.name == _DCP_METADATA:
            from ._dcp import check_metadata

            check_metadata(path)
        elif suffix == _DCP_SHARD:
            from ._dcp import check_shard

            check_shard(path)
        elif suffix == ".json":
            json.loads(path.read_text(encoding="utf-8"))
        elif suffix == ".safetensors":
            with safe_open(str(path), framework="pt"):
                pass
        elif suffix in (".bin", ".pt") or (suffix == ".pkl" and path.name.startswith(_RNG_FILES)):
            if not zipfile.is_zipfile(path):
                raise ValueError("a bare pickle where a torch archive of tensors is expected")
            # Read without running it: what the archive would build beyond tensors.
            unsafe = torch.serialization.get_unsafe_globals_in_checkpoint(str(path))
            if unsafe and suffix != ".pkl":
                raise ValueError(f"it would build {unsafe}, not only tensors and plain values")
            if suffix == ".pkl":
                # Accelerate would skip RNG states it cannot read without a word; read them
                # here, the way it does (weights_only, numpy arrays allowed), to refuse them.
                load(path, map_location="cpu")
        else:
            raise ValueError(
                f"a file of unknown kind ({suffix or 'no suffix'}); objects are checkpointed "
                "with Trainer.register_for_checkpointing, never as pickles"
            )
    except Exception as error:
        kind = _DCP_METADATA if path.name == _DCP_METADATA else suffix or "file"
        raise CheckpointError(f"{name} is not a valid {kind}: {error}") from error


def package_versions() -> dict[str, str]:
    """Versions of the packages a checkpoint's contents depend on."""
    return dict(_loaded_versions())


# Read once a process (each read scans the installed metadata, ~2 ms): the code a checkpoint
# depends on is the code already imported, which a later install does not change.
@functools.cache
def _loaded_versions() -> tuple[tuple[str, str], ...]:
    names = (
        "accmt-trainer",
        "accmt-state",
        "accmt-callbacks",
        "accmt-metrics",
        "torch",
        "accelerate",
    )
    versions = []
    for name in names:
        try:
            versions.append((name, importlib.metadata.version(name)))
        except importlib.metadata.PackageNotFoundError:
            versions.append((name, "unknown"))
    return tuple(versions)


_SETTINGS = ("train_batch_size", "grad_accumulation_steps", "batches_per_epoch", "stages")
ELSEWHERE = (
    "give this run an output folder of its own (the Trainer's model_path; --output in the "
    "examples), or pass resume=False to start afresh in this one (its checkpoints are then "
    "moved aside to checkpoints.old-<n>, not deleted)"
)


def check_compatible(made: RunFacts, now: RunFacts, path: Path) -> None:
    """Refuse a checkpoint made with settings that fix the position in the data other than
    this run's: the error says what differs, where the checkpoint stopped, and what to do.

    Another number of processes is not refused here: ``_resize`` maps the checkpoint's moment
    onto this run, and refuses only a moment within an epoch that this run cannot reach. The
    batches per epoch on each process then differ by nature; the order they are dealt from
    must not (``order_batches``, where both know it)."""
    resized = made.world_size != now.world_size
    if resized:
        _check_resizable(made, now, path)
    _check_sharding(made, now, path)
    for setting in _SETTINGS:
        key = "order_batches" if resized and setting == "batches_per_epoch" else setting
        was, is_ = getattr(made, key), getattr(now, key)
        if was == is_ or (key == "order_batches" and None in (was, is_)):
            continue
        shown = [list(stage) for stage in was] if key == "stages" and was else was
        here = [list(stage) for stage in is_] if key == "stages" and is_ else is_
        raise CheckpointError(
            f"checkpoint {path} was made with {key}={shown!r}, but this run has {key}={here!r}; "
            f"{_stopped(path)}. A checkpoint resumes only with the settings that made it "
            "(training batch size, grad_accumulation_steps, batches per epoch, stages): resume "
            f"with the same settings, or {ELSEWHERE}."
        )


def _check_sharding(made: RunFacts, now: RunFacts, path: Path) -> None:
    """Sharded state (FSDP, DeepSpeed) resumes only into a sharded run, and whole state only
    into a whole one, split the same way (FSDP's version and state dict type, where both
    checkpoint and run record it): refused here, before anything is moved, rather than by
    Accelerate's load."""
    if made.sharded != now.sharded:
        held = {True: "sharded by process (FSDP, DeepSpeed)", False: "whole on each process"}
        raise CheckpointError(
            f"checkpoint {path} holds model and optimizer state {held[made.sharded]}, and this "
            f"run's is {held[now.sharded]}; {_stopped(path)}. Resume with the distributed setup "
            f"that made it, or {ELSEWHERE}."
        )
    if None not in (made.sharding, now.sharding) and made.sharding != now.sharding:
        raise CheckpointError(
            f"checkpoint {path} holds model and optimizer state sharded as {made.sharding}, and "
            f"this run shards it as {now.sharding}; {_stopped(path)}. Resume with the sharding "
            f"that made it (FSDP's version and state dict type), or {ELSEWHERE}."
        )


def _check_resizable(made: RunFacts, now: RunFacts, path: Path) -> None:
    """Another number of processes: refused for a curriculum (its stages end at optimizer
    steps, which hold other samples on another number of processes) and for sharded state
    that torch.distributed.checkpoint does not reshard on load: all but FSDP2's sharded state
    dicts (a checkpoint that does not record its sharding is refused too). Sharded state into
    a run that holds it whole, or the reverse, is ``_check_sharding``'s to refuse."""
    if made.stages or now.stages:
        why = (
            "a curriculum's stages end at optimizer steps, and an optimizer step holds other "
            "samples on another number of processes"
        )
    elif made.sharded and now.sharded and not made.sharding == now.sharding == RESHARDED:
        split = made.sharding or "FSDP, DeepSpeed"
        why = (
            f"its model and optimizer state is sharded by process ({split}); only FSDP2's "
            f"sharded state dicts ({RESHARDED}) are resharded on load"
        )
    else:
        return
    was = processes(made.world_size)
    raise CheckpointError(
        f"checkpoint {path} was made on {was}, and this run has {now.world_size}; "
        f"{_stopped(path)}. {why[0].upper()}{why[1:]}, so it resumes only on "
        f"{was}: resume on {was}, or {ELSEWHERE}."
    )


def sharding(accelerator: Accelerator) -> str | None:
    """How ``accelerator`` splits model and optimizer state (``RunFacts.sharding``)."""
    kind = accelerator.distributed_type
    if kind not in SHARDED:
        return None
    plugin = getattr(accelerator.state, "fsdp_plugin", None)
    if kind != DistributedType.FSDP or plugin is None:
        return str(kind.value)
    state_dict = plugin.state_dict_type
    return f"FSDP{plugin.fsdp_version} {getattr(state_dict, 'name', state_dict)}"


def _stopped(path: Path) -> str:
    """Where the checkpoint's run stood: finished, at an epoch's end, or within an epoch."""
    try:
        state = TrainingState.load(path / "state.json")
    except StateError:
        return "its state cannot be read"
    at = f"step {state.global_step}"
    if state.finished:
        return f"its run had finished (epoch {state.epoch}, {at})"
    if not state.batches_seen_in_epoch:
        return f"it was made at the end of epoch {state.epoch} ({at})"
    return f"it was made at batch {state.batches_seen_in_epoch} of epoch {state.epoch + 1} ({at})"


def run_facts(
    accelerator: Accelerator, plan: EpochPlan, train_batch_size: int, max_steps: int | None
) -> RunFacts:
    """What a checkpoint must agree with to resume exactly (before the offsets of a resume on
    another number of processes, which ``_resize`` adds)."""
    return RunFacts(
        world_size=accelerator.num_processes,
        train_batch_size=train_batch_size,
        grad_accumulation_steps=accelerator.gradient_accumulation_steps,
        batches_per_epoch=plan.batches_per_epoch,
        order_batches=plan.order_batches,
        stages=plan.stage_facts,
        stream=plan.stream,
        sharded=accelerator.distributed_type in SHARDED,
        sharding=sharding(accelerator),
        max_steps=max_steps,
        versions=package_versions(),
    )
