"""Building a run's objects from the Trainer's options: the prepared model and loaders, each
validation set's metrics, the optimizer and scheduler (the Accelerator is ``_accelerator``'s)."""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import torch
from accelerate import Accelerator
from accelerate.data_loader import DataLoaderShard
from torch.optim import Optimizer
from torch.optim.lr_scheduler import LRScheduler
from torch.utils.data import BatchSampler, DataLoader, Dataset, Sampler

from accmt_metrics import Metric

from ._curriculum import Stage
from ._epoch_plan import EpochPlan
from ._errors import TrainerConfigError
from ._hyperparameters import HyperParameters
from ._module import AcceleratorModule, overrides
from ._sanity_check import check_data
from ._stages import Stages

if TYPE_CHECKING:
    from ._accelerator import GradientCheckpointing

DEFAULT_SET = "validation"
MetricsOption = Metric | Sequence[Metric] | Mapping[str, Metric | Sequence[Metric]] | None


@attrs.frozen(kw_only=True)
class LoaderOptions:
    """How the Trainer builds the loaders a module does not build itself: the training loader
    from ``sampler`` / ``batch_sampler`` / ``collate_fn``, each validation loader from the
    ``val_`` ones (``val_collate_fn`` defaults to ``collate_fn``). A batch sampler makes the
    batches: the batch size, shuffling and ``drop_last`` are then its own."""

    num_workers: int
    pin_memory: bool
    drop_last: bool
    shuffle_train: bool
    sampler: Sampler[Any] | None = None
    batch_sampler: BatchSampler | Sampler[list[Any]] | None = None
    collate_fn: Callable[[list[Any]], Any] | None = None
    val_sampler: Sampler[Any] | None = None
    val_batch_sampler: BatchSampler | Sampler[list[Any]] | None = None
    val_collate_fn: Callable[[list[Any]], Any] | None = None
    device_placement: bool = True
    """False leaves batches where the loader made them (on the CPU); the module moves them."""

    def __attrs_post_init__(self) -> None:
        pairs = (("sampler", "batch_sampler"), ("val_sampler", "val_batch_sampler"))
        for sampler, batch_sampler in pairs:
            if getattr(self, sampler) is not None and getattr(self, batch_sampler) is not None:
                raise TrainerConfigError(
                    f"Trainer({sampler}=..., {batch_sampler}=...): a batch sampler chooses the "
                    f"samples itself; give only one of them"
                )


@attrs.define(kw_only=True)
class Run:
    """The objects of one ``fit``, prepared by Accelerate."""

    accelerator: Accelerator
    model: torch.nn.Module
    train_loader: DataLoaderShard
    """The first stage's loader; ``plan`` says which one each epoch reads."""
    plan: EpochPlan
    val_loaders: dict[str, DataLoader[Any]]
    val_metrics: dict[str, list[Metric]]
    optimizer: Optimizer
    scheduler: LRScheduler | None
    steps_per_epoch: int
    total_steps: int
    epochs: int
    """``HyperParameters.epochs``, or for stages the passes they take (``plan``)."""
    train_batch_size: int
    """Samples per training batch on each process."""


def prepare_run(
    accelerator: Accelerator,
    module: AcceleratorModule,
    hps: HyperParameters,
    datasets: tuple[Dataset[Any] | Stages, dict[str, Dataset[Any]]],
    loader_options: LoaderOptions,
    metrics: MetricsOption,
    gradient_checkpointing: GradientCheckpointing | None = None,
    step_offset: Callable[[EpochPlan], int] | None = None,
) -> Run:
    """Loaders, model, metrics, optimizer and scheduler, prepared in Accelerate's order.

    ``step_offset`` is asked, once the loaders are prepared and before the schedule is sized,
    how far the run's ``global_step`` is from what this number of processes would count from
    the first step (a resume on another number of processes, see ``_resize``): the schedule
    spans the steps done plus the steps left here."""
    train_data, val_sets = datasets
    stages = train_data if isinstance(train_data, Stages) else None
    if stages is not None and hps.step_scheduler_per_epoch:
        raise TrainerConfigError(
            "HyperParameters(step_scheduler_per_epoch=True) cannot be used with stages (a "
            "curriculum): their epochs differ in length"
        )
    if gradient_checkpointing is not None:
        gradient_checkpointing.enable(module.model)
    train_loaders = [
        _train_loader(module, hps, loader_options, stage)
        for stage in (stages.stages if stages else [(0, train_data, {})])
    ]
    val_loaders = {
        key: evaluation_loader(module, dataset, hps, loader_options)
        for key, dataset in val_sets.items()
    }
    # None: Accelerate's own placement (on the device); False: the batches stay on the CPU.
    placement = None if loader_options.device_placement else False
    model, *prepared_train = accelerator.prepare(
        module.model,
        *train_loaders,
        device_placement=None if placement is None else [None, *[False] * len(train_loaders)],
    )
    prepared_val = {
        key: accelerator.prepare_data_loader(loader, device_placement=placement)
        for key, loader in val_loaders.items()
    }
    if module.teacher is not None:
        module.teacher.requires_grad_(False)
        module.teacher = accelerator.prepare_model(module.teacher, evaluation_mode=True)
        module.teacher.eval()
    module.model = model
    accumulation = accelerator.gradient_accumulation_steps
    plan = EpochPlan.build(prepared_train, stages.end_steps if stages else None, accumulation)
    # Before the schedule is sized by the loaders' lengths: an empty one is named, not a 0.
    check_data(plan.loaders, prepared_val)
    steps_per_epoch = math.ceil(len(prepared_train[0]) / accumulation)
    offset = 0 if step_offset is None else step_offset(plan)
    total_steps = hps.epochs * steps_per_epoch + offset
    if hps.max_steps is not None:
        total_steps = min(total_steps, hps.max_steps)
    if plan.layout is not None:
        total_steps = plan.layout.end_steps[-1]
    epochs = hps.epochs if plan.layout is None else plan.layout.epochs
    optimizer, scheduler = _optimization(accelerator, module, model, hps, (total_steps, epochs))
    return Run(
        accelerator=accelerator,
        model=model,
        train_loader=prepared_train[0],
        plan=plan,
        val_loaders=prepared_val,
        val_metrics=metrics_per_set(metrics, {k: samples(val_loaders[k]) for k in val_sets}),
        optimizer=optimizer,
        scheduler=scheduler,
        steps_per_epoch=steps_per_epoch,
        total_steps=total_steps,
        epochs=epochs,
        train_batch_size=hps.train_batch_size,
    )


def _train_loader(
    module: AcceleratorModule, hps: HyperParameters, options: LoaderOptions, stage: Stage
) -> DataLoader[Any]:
    """The loader of one dataset, or of one stage with its own DataLoader keyword arguments."""
    _, dataset, loader_kwargs = stage
    own = module.get_train_dataloader(dataset)
    if own is not None:
        return own
    try:
        return _loader(
            module, dataset, hps.train_batch_size, options, train=True, loader_kwargs=loader_kwargs
        )
    except (TypeError, ValueError) as error:
        if not loader_kwargs:
            raise
        raise TrainerConfigError(
            f"Trainer.fit(train_dataset=...): a stage's dataloader_kwargs {loader_kwargs!r} do "
            f"not make a DataLoader: {error}"
        ) from error


def evaluation_loader(
    module: AcceleratorModule, dataset: Dataset[Any], hps: HyperParameters, options: LoaderOptions
) -> DataLoader[Any]:
    """The loader of a set to evaluate or predict: the module's own, else the Trainer's."""
    own = module.get_validation_dataloader(dataset)
    return own or _loader(module, dataset, hps.val_batch_size, options, train=False)


def named_sets(
    val_dataset: Dataset[Any] | Mapping[str, Dataset[Any]] | None, default: str = DEFAULT_SET
) -> dict[str, Dataset[Any]]:
    if val_dataset is None:
        return {}
    if isinstance(val_dataset, Mapping):
        return dict(val_dataset)
    return {default: val_dataset}


def metrics_per_set(
    metrics: MetricsOption, val_sets: Mapping[str, int | None]
) -> dict[str, list[Metric]]:
    """Each set's own copies of its metrics, sized to the samples an evaluation of the set
    gives (``val_sets``: set -> that number, None when unknown)."""
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
        for metric in ms:
            metric.num_samples = val_sets[key]
    return per_set


def _metric_list(metrics: Any) -> list[Metric]:
    if metrics is None:
        return []
    if isinstance(metrics, Metric):
        return [metrics]
    if not isinstance(metrics, Iterable) or isinstance(metrics, str):
        raise TrainerConfigError(
            f"Trainer(metrics=...): expected a Metric, a list of them, or a dict of them by "
            f"validation set, got {type(metrics).__name__} {metrics!r}"
        )
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
    loader_kwargs: Mapping[str, Any] | None = None,
) -> DataLoader[Any]:
    """The Trainer's DataLoader of ``dataset``; ``loader_kwargs`` (a stage's) override it."""
    collate: Callable[[list[Any]], Any] | None
    if overrides(module, "collate_fn"):
        collate = module.collate_fn
    else:
        collate = options.collate_fn if train else options.val_collate_fn or options.collate_fn
    common: dict[str, Any] = {
        "collate_fn": collate,
        "num_workers": options.num_workers,
        "pin_memory": options.pin_memory,
    }
    batch_sampler = options.batch_sampler if train else options.val_batch_sampler
    sampler = options.sampler if train else options.val_sampler
    if batch_sampler is not None:
        common["batch_sampler"] = batch_sampler
    else:
        common.update(
            batch_size=batch_size,
            sampler=sampler,
            drop_last=train and options.drop_last,
            shuffle=options.shuffle_train and train and sampler is None,
        )
    return DataLoader(dataset, **{**common, **(loader_kwargs or {})})


def _optimization(
    accelerator: Accelerator,
    module: AcceleratorModule,
    model: torch.nn.Module,
    hps: HyperParameters,
    length: tuple[int, int],
) -> tuple[Optimizer, LRScheduler | None]:
    """The optimizer, and the scheduler sized to ``length``: (optimizer steps, epochs)."""
    total_steps, epochs = length
    optimizer = module.get_optimizer() or hps.build_optimizer(
        p for p in model.parameters() if p.requires_grad
    )
    scheduler_steps = epochs if hps.step_scheduler_per_epoch else total_steps
    scheduler = module.get_scheduler(optimizer, scheduler_steps, epochs) or hps.build_scheduler(
        optimizer, scheduler_steps, epochs
    )
    prepared = accelerator.prepare_optimizer(optimizer)
    return prepared, accelerator.prepare_scheduler(scheduler) if scheduler is not None else None


def samples(loader: DataLoader[Any]) -> int | None:
    """How many samples one pass of ``loader`` gives, where its batch sampler says so without
    drawing (drawing would use the RNG that exact resume restores); else None."""
    batch_sampler = loader.batch_sampler
    if isinstance(batch_sampler, BatchSampler):
        if batch_sampler.drop_last:
            return len(batch_sampler) * batch_sampler.batch_size
        return length_or_none(batch_sampler.sampler)
    return length_or_none(loader.dataset) if batch_sampler is None else None


def length_or_none(sized: Any) -> int | None:
    try:
        return len(sized)
    except TypeError:
        return None
