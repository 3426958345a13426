"""What ``evaluate`` and ``predict`` share: a job of their own on the module (as it is, or with
saved weights), whose loaders give every sample once, in the one-process order.

Accelerate evens out the last round of batches by repeating samples from the start, so that
every process steps together. Inference has no step to keep together: each process takes the
batches ``p, p + N, p + 2N, ...`` of the one-process order and the last round is uneven. The
model is prepared in Accelerate's evaluation mode (on the device, mixed precision, no DDP
wrapper), so its forward makes no collective call that a process with fewer batches would
leave waiting.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from accelerate import Accelerator
from accelerate.utils import extract_model_from_parallel
from torch.utils.data import DataLoader, Dataset, IterableDataset

from .._errors import TrainerConfigError
from .._module import RunHandle, bind_module
from ..checkpointing import load_weights, parse_rule
from ..data import check_flattening, evaluation_loader, prepare_stream_evaluation
from ..runtime import (
    ProcessGroupScope,
    drop_mixed_precision_forward,
    make_accelerator,
    shards_the_model,
)

if TYPE_CHECKING:
    from accmt_state import TrainingState

    from .._module import AcceleratorModule, LogValues
    from ._options import InferenceOptions

Weights = str | os.PathLike[str] | None
"""What ``evaluate`` and ``predict`` run: the module as it is (None), the best model of a
saving rule (``"best_valid_loss"``, ``"accuracy"``), or a saved folder or checkpoint. Weights
are loaded into ``module.model``, which keeps them: evaluating the best model and then
predicting with it needs them loaded once."""


@contextlib.contextmanager
def inference_job(
    options: InferenceOptions,
    module: AcceleratorModule,
    weights: Weights,
    call: str,
    *,
    state: TrainingState,
    log: LogValues,
) -> Iterator[Accelerator]:
    """``module`` ready to infer on this job's processes, inside a process group scope of its
    own; ``module.model`` is given back as it was found. ``call`` names the caller in errors."""
    source = resolve_weights(options.model_path, weights, call)
    with ProcessGroupScope() as scope:
        accelerator = scope.own(
            make_accelerator(
                options.accelerator_options, options.logging_options, every_sample_once=True
            )
        )
        if shards_the_model(accelerator):
            raise TrainerConfigError(
                f"{call}: a model sharded across processes ({accelerator.distributed_type}) "
                "cannot yet be evaluated with every sample once; evaluate it on one process, "
                "or with DDP"
            )
        found = module.model
        model = extract_model_from_parallel(found)
        if source is not None:
            load_weights(model, source)
        module.model = accelerator.prepare_model(model, evaluation_mode=True)
        bind_module(module, accelerator, state, RunHandle(None, log))
        try:
            yield accelerator
        finally:
            drop_mixed_precision_forward(model)
            module.model = found


def inference_loader(
    accelerator: Accelerator,
    options: InferenceOptions,
    module: AcceleratorModule,
    dataset: Dataset[Any],
    where: str,
) -> DataLoader[Any]:
    """The prepared loader of ``dataset``: this process's batches, each sample once overall.
    ``where`` names the data in errors."""
    loader = evaluation_loader(module, dataset, options.hps, options.loader_options)
    check_flattening(loader, where)
    placement = None if options.loader_options.batch_device_placement else False
    if isinstance(loader.dataset, IterableDataset) and accelerator.num_processes > 1:
        return prepare_stream_evaluation(accelerator, loader, placement)
    prepared: DataLoader[Any] = accelerator.prepare_data_loader(loader, device_placement=placement)
    return prepared


def resolve_weights(model_path: Path, weights: Weights, call: str) -> Path | None:
    """The folder or file that ``weights`` names: a saving rule's folder under ``model_path``
    first, else a path."""
    if weights is None:
        return None
    if isinstance(weights, str):
        with contextlib.suppress(TrainerConfigError):
            folder = model_path / parse_rule(weights).folder
            if folder.is_dir():
                return folder
    path = Path(weights)
    if path.exists():
        return path
    saved = sorted(p.name for p in model_path.glob("*") if (p / "metrics.json").is_file())
    raise TrainerConfigError(
        f"{call}(weights={str(weights)!r}): no best model of that rule under {model_path} "
        f"(saved there: {saved or 'none'}) and no such file or folder"
    )
