"""Building a run's objects from the Trainer's options: the Accelerator, the prepared model and
loaders, each validation set's metrics, the optimizer and scheduler."""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import torch
from accelerate import Accelerator
from accelerate.data_loader import DataLoaderShard
from accelerate.utils import DataLoaderConfiguration
from torch.optim import Optimizer
from torch.optim.lr_scheduler import LRScheduler
from torch.utils.data import DataLoader, Dataset, Sampler

from accmt_decorators import current_process
from accmt_metrics import Metric

from ._errors import TrainerConfigError
from ._hyperparameters import HyperParameters
from ._module import AcceleratorModule, overrides

DEFAULT_SET = "validation"
MetricsOption = Metric | Sequence[Metric] | Mapping[str, Metric | Sequence[Metric]] | None


@attrs.frozen(kw_only=True)
class AcceleratorOptions:
    """What the Accelerator of a run is made with."""

    cpu: bool | None
    mixed_precision: str | None
    grad_accumulation_steps: int
    seed: int | None
    log_with: list[str] | None
    logging_dir: Path
    compile: bool


@attrs.frozen(kw_only=True)
class LoaderOptions:
    """How the Trainer builds the loaders a module does not build itself."""

    num_workers: int
    pin_memory: bool
    drop_last: bool
    shuffle_train: bool
    sampler: Sampler[Any] | None
    collate_fn: Callable[[list[Any]], Any] | None


@attrs.define(kw_only=True)
class Run:
    """The objects of one ``fit``, prepared by Accelerate."""

    accelerator: Accelerator
    model: torch.nn.Module
    train_loader: DataLoaderShard
    val_loaders: dict[str, DataLoader[Any]]
    val_metrics: dict[str, list[Metric]]
    optimizer: Optimizer
    scheduler: LRScheduler | None
    steps_per_epoch: int
    total_steps: int


def make_accelerator(options: AcceleratorOptions) -> Accelerator:
    return Accelerator(
        cpu=use_cpu(options.cpu),
        mixed_precision=options.mixed_precision,
        gradient_accumulation_steps=options.grad_accumulation_steps,
        # The scheduler is stepped by the loop, once per real optimizer step, and sized to
        # exactly that count; Accelerate would otherwise step it once per process.
        step_scheduler_with_optimizer=False,
        dataloader_config=DataLoaderConfiguration(
            use_seedable_sampler=True, data_seed=options.seed
        ),
        log_with=options.log_with,
        project_dir=str(options.logging_dir),
        dynamo_backend="inductor" if options.compile else None,
    )


def prepare_run(
    accelerator: Accelerator,
    module: AcceleratorModule,
    hps: HyperParameters,
    datasets: tuple[Dataset[Any], dict[str, Dataset[Any]]],
    loader_options: LoaderOptions,
    metrics: MetricsOption,
) -> Run:
    """Loaders, model, metrics, optimizer and scheduler, prepared in Accelerate's order."""
    train_dataset, val_sets = datasets
    train_loader = module.get_train_dataloader(train_dataset) or _loader(
        module, train_dataset, hps.train_batch_size, loader_options, train=True
    )
    val_loaders = {
        key: module.get_validation_dataloader(dataset)
        or _loader(module, dataset, hps.val_batch_size, loader_options, train=False)
        for key, dataset in val_sets.items()
    }
    model, prepared_train = accelerator.prepare(module.model, train_loader)
    prepared_val = {key: accelerator.prepare(loader) for key, loader in val_loaders.items()}
    if module.teacher is not None:
        module.teacher.requires_grad_(False)
        module.teacher = accelerator.prepare_model(module.teacher, evaluation_mode=True)
        module.teacher.eval()
    module.model = model
    steps_per_epoch = math.ceil(len(prepared_train) / accelerator.gradient_accumulation_steps)
    total_steps = hps.epochs * steps_per_epoch
    if hps.max_steps is not None:
        total_steps = min(total_steps, hps.max_steps)
    optimizer, scheduler = _optimization(accelerator, module, model, hps, total_steps)
    return Run(
        accelerator=accelerator,
        model=model,
        train_loader=prepared_train,
        val_loaders=prepared_val,
        val_metrics=metrics_per_set(metrics, val_sets),
        optimizer=optimizer,
        scheduler=scheduler,
        steps_per_epoch=steps_per_epoch,
        total_steps=total_steps,
    )


def named_sets(
    val_dataset: Dataset[Any] | Mapping[str, Dataset[Any]] | None,
) -> dict[str, Dataset[Any]]:
    if val_dataset is None:
        return {}
    if isinstance(val_dataset, Mapping):
        return dict(val_dataset)
    return {DEFAULT_SET: val_dataset}


def metrics_per_set(
    metrics: MetricsOption, val_sets: Mapping[str, Dataset[Any]]
) -> dict[str, list[Metric]]:
    """Each set's own copies of its metrics, sized to the set."""
    if isinstance(metrics, Mapping):
        unknown = set(metrics) - set(val_sets)
        if unknown:
            raise TrainerConfigError(
                f"Trainer(metrics=...): no validation set named {sorted(unknown)}; "
                f"the sets are {sorted(val_sets)}"
            )
        chosen = {key: _metric_list(metrics.get(key)) for key in val_sets}
    else:
        chosen = {key: _metric_list(metrics) for key in val_sets}
    # Each set accumulates into its own copies, so one set's batches never mix with another's.
    per_set = {key: [copy.deepcopy(metric) for metric in ms] for key, ms in chosen.items()}
    for key, ms in per_set.items():
        size = _length(val_sets[key])
        for metric in ms:
            metric.num_samples = size
    return per_set


def _metric_list(metrics: Metric | Sequence[Metric] | None) -> list[Metric]:
    if metrics is None:
        return []
    if isinstance(metrics, Metric):
        return [metrics]
    listed = list(metrics)
    for metric in listed:
        if not isinstance(metric, Metric):
            raise TrainerConfigError(
                f"Trainer(metrics=...): expected accmt_metrics.Metric instances, got "
                f"{type(metric).__name__} {metric!r}"
            )
    return listed


def _loader(
    module: AcceleratorModule,
    dataset: Dataset[Any],
    batch_size: int,
    options: LoaderOptions,
    *,
    train: bool,
) -> DataLoader[Any]:
    collate = module.collate_fn if overrides(module, "collate_fn") else options.collate_fn
    sampler = options.sampler if train else None
    return DataLoader(
        dataset,
        batch_size=batch_size,
        shuffle=options.shuffle_train and train and sampler is None,
        sampler=sampler,
        collate_fn=collate,
        num_workers=options.num_workers,
        pin_memory=options.pin_memory,
        drop_last=train and options.drop_last,
    )


def _optimization(
    accelerator: Accelerator,
    module: AcceleratorModule,
    model: torch.nn.Module,
    hps: HyperParameters,
    total_steps: int,
) -> tuple[Optimizer, LRScheduler | None]:
    optimizer = module.get_optimizer() or hps.build_optimizer(
        p for p in model.parameters() if p.requires_grad
    )
    scheduler_steps = hps.epochs if hps.step_scheduler_per_epoch else total_steps
    scheduler = module.get_scheduler(optimizer, scheduler_steps, hps.epochs) or hps.build_scheduler(
        optimizer, scheduler_steps, hps.epochs
    )
    prepared = accelerator.prepare_optimizer(optimizer)
    return prepared, accelerator.prepare_scheduler(scheduler) if scheduler is not None else None


def _length(dataset: Dataset[Any]) -> int | None:
    try:
        return len(dataset)  # type: ignore[arg-type]
    except TypeError:
        return None


def use_cpu(cpu: bool | None) -> bool:
    """True forces the CPU; None picks it for a job of several processes on a machine without
    an accelerator, where Accelerate alone would run each process as its own job."""
    if cpu is not None:
        return cpu
    if current_process().num_processes == 1:
        return False
    xpu = getattr(torch, "xpu", None)
    mps = getattr(torch.backends, "mps", None)
    return not (
        torch.cuda.is_available()
        or (xpu is not None and xpu.is_available())
        or (mps is not None and mps.is_available())
    )
