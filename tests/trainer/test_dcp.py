"""torch.distributed.checkpoint folders (FSDP's sharded state dicts) in a checkpoint: the
verifier reads their ``.metadata`` with an unpickler that builds only DCP's metadata classes
and checks every byte range it names; crafted files are refused by name and run no code."""

from __future__ import annotations

import json
import os
import pickle
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed.checkpoint as dcp

from accmt_trainer import CheckpointError
from accmt_trainer.checkpointing._dcp import read_metadata
from accmt_trainer.checkpointing._manifest import inventory, verify
from accmt_trainer.checkpointing._run_facts import MANIFEST, Manifest, RunFacts, manifest_to_json

# DCP saves these folders in this one process, and says so.
pytestmark = pytest.mark.filterwarnings("ignore:torch.distributed is disabled")


class Payload:
    """Unpickling it creates ``marker``: proof that code ran."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (f"touch {self.marker}",))


def checkpoint(folder: Path, state: dict[str, Any]) -> Path:
    """A checkpoint whose only part is a DCP folder of ``state``, its manifest made last."""
    dcp.save(state, checkpoint_id=folder / "accelerate" / "optimizer_0", no_dist=True)
    return seal(folder)


def seal(folder: Path) -> Path:
    """The manifest of what ``folder`` holds now (forged, where a file was crafted)."""
    facts = RunFacts(
        world_size=1,
        train_batch_size=1,
        grad_accumulation_steps=1,
        batches_per_epoch=1,
        order_batches=1,
        sharded=True,
    )
    manifest = Manifest(facts=facts, index=1, files=inventory(folder))
    (folder / MANIFEST).write_text(json.dumps(manifest_to_json(manifest)))
    return folder


STATE = {"weight": torch.arange(6.0).reshape(2, 3), "lr": 0.01, "betas": (0.9, 0.99)}
METADATA = "accelerate/optimizer_0/.metadata"


def test_a_dcp_folder_verifies_and_its_metadata_reads(tmp_path: Path) -> None:
    folder = checkpoint(tmp_path, STATE)
    verify(folder)
    metadata = read_metadata(folder / METADATA)
    assert sorted(metadata.state_dict_metadata) == ["betas", "lr", "weight"]


def test_a_crafted_metadata_runs_no_code_and_is_named(tmp_path: Path) -> None:
    folder = checkpoint(tmp_path, STATE)
    marker = tmp_path / "code-ran"
    (folder / METADATA).write_bytes(pickle.dumps(Payload(marker)))
    seal(folder)
    with pytest.raises(CheckpointError, match=f"{METADATA} is not a valid .metadata: .*system"):
        verify(folder)
    assert not marker.exists()


def test_a_metadata_of_other_classes_is_refused(tmp_path: Path) -> None:
    folder = checkpoint(tmp_path, STATE)
    (folder / METADATA).write_bytes(pickle.dumps(Counter("ab")))
    seal(folder)
    with pytest.raises(CheckpointError, match=r"names collections\.Counter"):
        verify(folder)


def test_an_entry_that_would_run_code_is_refused(tmp_path: Path) -> None:
    # DCP stores a value that is not a tensor as a torch.save archive, and reads it back with
    # weights_only=False: this one would run os.system.
    marker = tmp_path / "code-ran"
    folder = checkpoint(tmp_path, {**STATE, "hook": Payload(marker)})
    with pytest.raises(CheckpointError, match=r"entry 'hook' in __0_0.distcp would build .*system"):
        verify(folder)
    assert not marker.exists()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"relative_path": "../outside.distcp"}, "not a .distcp file beside it"),
        ({"relative_path": "__9_0.distcp"}, "__9_0.distcp, which is missing"),
        ({"length": 10**9}, "lies outside its file"),
        ({"offset": -1}, "lies outside its file"),
        ({"offset": 3}, "is not a torch archive"),
        ({"transform_descriptors": ["zstd"]}, "stored transformed"),
    ],
)
def test_a_metadata_that_misplaces_an_entry_is_refused(
    tmp_path: Path, change: dict[str, Any], message: str
) -> None:
    folder = checkpoint(tmp_path, STATE)
    metadata = read_metadata(folder / METADATA)
    stored = next(info for index, info in metadata.storage_data.items() if index.fqn == "weight")
    for field, value in change.items():
        setattr(stored, field, value)
    (folder / METADATA).write_bytes(pickle.dumps(metadata))
    seal(folder)
    with pytest.raises(CheckpointError, match=f"{METADATA} is not a valid .metadata: .*{message}"):
        verify(folder)


def test_a_shard_without_its_metadata_is_refused(tmp_path: Path) -> None:
    folder = checkpoint(tmp_path, STATE)
    (folder / METADATA).unlink()
    seal(folder)
    with pytest.raises(CheckpointError, match=r"without the \.metadata of its folder"):
        verify(folder)
