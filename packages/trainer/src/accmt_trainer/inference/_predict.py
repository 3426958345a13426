"""``Trainer.predict``: ``predict_step`` over a dataset on any number of processes, each sample
once, in dataset order; returned on every process or written to a folder in shards."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from accelerate import Accelerator
from accelerate.utils import convert_file_size_to_int, gather_object
from tqdm.auto import tqdm

from .._errors import TrainerConfigError
from .._module import check_module, overrides
from ..checkpointing import check_writable, replace_folder
from ..config import check_shard_size
from ..console import shows_progress
from ..data import check_not_empty, length_or_none
from ..evaluation import take_documents
from ._job import Weights, inference_job, inference_loader
from ._predictions import ShardWriter, Structure, concatenate, flatten, samples_in, write_index

if TYPE_CHECKING:
    import os

    from torch.utils.data import DataLoader, Dataset

    from accmt_state import TrainingState

    from .._module import AcceleratorModule, LogValues
    from ._options import InferenceOptions

Batches = list[tuple[int, list[Any]]]
"""This process's batches: (index in dataset order, leaves)."""


def predict(
    options: InferenceOptions,
    module: AcceleratorModule,
    data: Dataset[Any],
    weights: Weights,
    output_dir: str | os.PathLike[str] | None,
    max_shard_size: int | str,
    *,
    state: TrainingState,
    log: LogValues,
) -> Any:
    """See :meth:`Trainer.predict`."""
    call = "Trainer.predict"
    check_module(module, call)
    check_not_empty(data, f"{call}(data=...): the dataset")
    if not overrides(module, "predict_step"):
        raise TrainerConfigError(f"{call}: {type(module).__name__} must override predict_step")
    folder = None if output_dir is None else Path(output_dir)
    if folder is not None:
        check_shard_size(max_shard_size)
        check_writable([("output_dir", folder.parent)])
    with inference_job(options, module, weights, call, state=state, log=log) as accelerator:
        loader = inference_loader(accelerator, options, module, data, f"{call}(data=...)")
        if folder is None:
            structure, batches = _predict_batches(accelerator, options, module, loader, None)
            return _assembled(accelerator, structure, batches)
        staging = folder.with_name(f".tmp-{folder.name}")
        if accelerator.is_main_process:
            shutil.rmtree(staging, ignore_errors=True)
            staging.mkdir(parents=True)
        accelerator.wait_for_everyone()
        limit = convert_file_size_to_int(max_shard_size)
        writer = ShardWriter(staging, accelerator.process_index, limit)
        structure, _ = _predict_batches(accelerator, options, module, loader, writer)
        writer.flush()
        everyone = gather_object([(structure, writer.written)])
        structure = _agreed([part[0] for part in everyone])
        if accelerator.is_main_process:
            write_index(staging, structure, [b for _, written in everyone for b in written])
            replace_folder(staging, folder)
        accelerator.wait_for_everyone()
        return folder


def _predict_batches(
    accelerator: Accelerator,
    options: InferenceOptions,
    module: AcceleratorModule,
    loader: DataLoader[Any],
    writer: ShardWriter | None,
) -> tuple[Structure | None, Batches]:
    """This process's batches through ``predict_step``: kept, or handed to ``writer``."""
    rank, processes = accelerator.process_index, accelerator.num_processes
    shown = shows_progress(options.logging_options.progress_bar, accelerator.is_main_process)
    bar = tqdm(total=length_or_none(loader), desc="predict", disable=not shown)
    structure: Structure | None = None
    kept: Batches = []
    model = module.model
    training = model.training
    model.eval()
    with torch.no_grad(), bar:
        for position, batch in enumerate(loader):
            # Accelerate deals batch k of the one-process order to process k % processes.
            index = rank + position * processes
            where = f"{type(module).__name__}.predict_step(batch {index})"
            # A flattened batch: document_spans never reach the step, and its outputs are
            # cut back into one prediction per document, in the order of their indices.
            batch, documents = take_documents(batch, where)
            output = module.predict_step(batch)
            if documents is not None:
                output = documents.predictions(output)
            found, leaves = flatten(output, where)
            samples_in(leaves, where)
            if structure is not None and found != structure:
                raise TrainerConfigError(
                    f"{where} returned the structure {found}, where the batches before gave "
                    f"{structure}; every batch's outputs must have the same containers"
                )
            structure = found
            if writer is None:
                kept.append((index, [_detached(leaf) for leaf in leaves]))
            else:
                writer.add(index, leaves, where)
            bar.update()
    model.train(training)
    return structure, kept


def _detached(leaf: Any) -> Any:
    return leaf.detach() if isinstance(leaf, torch.Tensor) else leaf


def _assembled(accelerator: Accelerator, structure: Structure | None, kept: Batches) -> Any:
    """Every process's batches, in dataset order, on the CPU, on every process."""
    local = [(i, [_on_cpu(leaf) for leaf in leaves]) for i, leaves in kept]
    everyone = gather_object([(structure, local)]) if accelerator.num_processes > 1 else None
    if everyone is None:
        return concatenate(_agreed([structure]), [leaves for _, leaves in local])
    batches = sorted((b for _, part in everyone for b in part), key=lambda b: int(b[0]))
    return concatenate(_agreed([s for s, _ in everyone]), [leaves for _, leaves in batches])


def _on_cpu(leaf: Any) -> Any:
    if isinstance(leaf, torch.Tensor):
        return leaf.cpu()
    return [item.cpu() if isinstance(item, torch.Tensor) else item for item in leaf]


def _agreed(structures: list[Structure | None]) -> Structure:
    """The one structure every process's batches had."""
    found = {json.dumps(s): s for s in structures if s is not None}
    if len(found) != 1:
        raise TrainerConfigError(
            "Trainer.predict: "
            + (
                "no batch was predicted"
                if not found
                else f"the processes' batches had different structures: {sorted(found)}"
            )
        )
    return next(iter(found.values()))
