"""Predictions: each batch's outputs put together in dataset order, and their folder form.

An output is a tensor whose first dimension is the batch, a list with one item per sample
(ragged sequences), or dicts (string keys) and tuples of these. Its *structure* (what the
containers are) is the same for every batch; its *leaves* (tensors and lists) are concatenated
across batches. A tensor leaf whose later dimensions differ between batches (sequences padded
to each batch's longest) becomes a list of per-sample tensors.

The folder form holds safetensors shards written by each process as it goes, and
``predictions.json`` (written last, by the main process) saying the structure and, in dataset
order, which shard holds each batch. Reading it runs no code.
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from .._errors import TrainerConfigError

Structure = Any
"""JSON: ``"tensor"``, ``"list"``, ``{"dict": {key: structure}}`` or ``{"tuple": [...]}``."""
INDEX = "predictions.json"
FORMAT = "accmt-predictions/1"


def flatten(output: Any, where: str) -> tuple[Structure, list[Any]]:
    """The structure of ``output`` and its leaves, depth first."""
    if isinstance(output, torch.Tensor):
        if output.ndim == 0:
            raise TrainerConfigError(
                f"{where} is a 0-dimensional tensor; a prediction's first dimension is the batch"
            )
        return "tensor", [output]
    if isinstance(output, list):
        return "list", [output]
    if isinstance(output, dict) and all(isinstance(key, str) for key in output):
        parts = {key: flatten(value, f"{where}[{key!r}]") for key, value in output.items()}
        leaves = [leaf for _, part in parts.values() for leaf in part]
        return {"dict": {key: part[0] for key, part in parts.items()}}, leaves
    if isinstance(output, tuple):
        parts_ = [flatten(value, f"{where}[{i}]") for i, value in enumerate(output)]
        return {"tuple": [part[0] for part in parts_]}, [x for _, p in parts_ for x in p]
    raise TrainerConfigError(
        f"{where} is a {type(output).__name__}; predict_step returns tensors (batch first), "
        "lists (one item per sample), and dicts with string keys or tuples of these"
    )


def unflatten(structure: Structure, leaves: Iterator[Any]) -> Any:
    if structure in ("tensor", "list"):
        return next(leaves)
    if "dict" in structure:
        return {key: unflatten(part, leaves) for key, part in structure["dict"].items()}
    return tuple(unflatten(part, leaves) for part in structure["tuple"])


def samples_in(leaves: Sequence[Any], where: str) -> int:
    """How many samples a batch's leaves hold: they must agree."""
    sizes = {len(leaf) if isinstance(leaf, list) else leaf.shape[0] for leaf in leaves}
    if len(sizes) != 1:
        raise TrainerConfigError(
            f"{where}: its tensors and lists hold different numbers of samples {sorted(sizes)}; "
            "each must have one row (or item) per sample of the batch"
        )
    return sizes.pop()


def concatenate(structure: Structure, batches: Sequence[Sequence[Any]]) -> Any:
    """One output from the leaves of every batch, in order."""
    columns = [_join([batch[i] for batch in batches]) for i in range(len(batches[0]))]
    return unflatten(structure, iter(columns))


def _join(parts: list[Any]) -> Any:
    if isinstance(parts[0], list):
        return list(itertools.chain.from_iterable(parts))
    if len({part.shape[1:] for part in parts}) == 1:
        return torch.cat(parts)
    return [row for part in parts for row in part.unbind(0)]


class ShardWriter:
    """One process's batches, written to safetensors shards of about ``max_bytes`` each."""

    def __init__(self, folder: Path, process_index: int, max_bytes: int) -> None:
        self.folder, self.process_index, self.max_bytes = folder, process_index, max_bytes
        self.pending: dict[str, torch.Tensor] = {}
        self.pending_batches: list[int] = []
        self.written: list[tuple[int, str]] = []  # (batch index, shard file)
        self.shards = 0

    def add(self, index: int, leaves: Sequence[Any], where: str) -> None:
        for position, leaf in enumerate(leaves):
            if isinstance(leaf, torch.Tensor):
                self.pending[f"{index}.{position}"] = _stored(leaf)
                continue
            self.pending[f"{index}.{position}.len"] = torch.tensor(len(leaf))
            for item, value in enumerate(leaf):
                if not isinstance(value, torch.Tensor):
                    raise TrainerConfigError(
                        f"{where}: a list item is a {type(value).__name__}; written to a "
                        "folder, predictions hold tensors only"
                    )
                self.pending[f"{index}.{position}.{item}"] = _stored(value)
        self.pending_batches.append(index)
        if sum(t.nbytes for t in self.pending.values()) >= self.max_bytes:
            self.flush()

    def flush(self) -> None:
        if not self.pending_batches:
            return
        file = f"shard-{self.process_index:03d}-{self.shards:05d}.safetensors"
        self.shards += 1
        save_file(self.pending, str(self.folder / file))
        self.written.extend((index, file) for index in self.pending_batches)
        self.pending, self.pending_batches = {}, []


def _stored(tensor: torch.Tensor) -> torch.Tensor:
    # safetensors refuses tensors that share memory (the rows of one unbound tensor).
    return tensor.detach().to("cpu", copy=True).contiguous()


def write_index(folder: Path, structure: Structure, batches: list[tuple[int, str]]) -> None:
    """``predictions.json``, the batches in dataset order; written last: it marks the folder
    complete."""
    order = [file for _, file in sorted(batches)]
    index = {"format": FORMAT, "structure": structure, "batches": order}
    (folder / INDEX).write_text(json.dumps(index))


def iter_predictions(folder: str | os.PathLike[str]) -> Iterator[Any]:
    """The outputs that :meth:`Trainer.predict` wrote to ``folder``, one batch at a time in
    dataset order: for outputs larger than memory."""
    for structure, leaves in _stored_batches(Path(folder)):
        yield unflatten(structure, iter(leaves))


def load_predictions(folder: str | os.PathLike[str]) -> Any:
    """The outputs that :meth:`Trainer.predict` wrote to ``folder``, as it would have returned
    them."""
    batches = list(_stored_batches(Path(folder)))
    if not batches:
        raise TrainerConfigError(f"load_predictions({str(folder)!r}): it holds no batch")
    return concatenate(batches[0][0], [leaves for _, leaves in batches])


def _stored_batches(folder: Path) -> Iterator[tuple[Structure, list[Any]]]:
    structure, files = _read_index(folder)
    opened: tuple[str, Any, set[str]] = ("", None, set())
    for index, file in enumerate(files):
        if opened[0] != file:
            shard: Any = safe_open(str(folder / file), framework="pt")
            opened = (file, shard, set(shard.keys()))
        _, shard, keys = opened
        leaves: list[Any] = []
        for position in itertools.count():
            key = f"{index}.{position}"
            if key in keys:
                leaves.append(shard.get_tensor(key))
            elif f"{key}.len" in keys:
                count = int(shard.get_tensor(f"{key}.len"))
                leaves.append([shard.get_tensor(f"{key}.{item}") for item in range(count)])
            else:
                break
        yield structure, leaves


def _read_index(folder: Path) -> tuple[Structure, list[str]]:
    where = f"load_predictions({str(folder)!r})"
    try:
        index = json.loads((folder / INDEX).read_text())
    except (OSError, ValueError) as error:
        raise TrainerConfigError(f"{where}: no readable {INDEX}: {error}") from None
    if not isinstance(index, dict) or index.get("format") != FORMAT:
        raise TrainerConfigError(f"{where}: {INDEX} is not of the format {FORMAT!r}")
    files = index.get("batches")
    if not isinstance(files, list) or not all(_shard_name(file) for file in files):
        raise TrainerConfigError(f"{where}: {INDEX} must list .safetensors files of the folder")
    return index["structure"], files


def _shard_name(file: Any) -> bool:
    return isinstance(file, str) and Path(file).name == file and file.endswith(".safetensors")
