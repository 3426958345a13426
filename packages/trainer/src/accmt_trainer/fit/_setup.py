"""Building a run's objects from the Trainer's options, in two steps: the prepared model,
loaders and each validation set's metrics (:func:`prepare_data`), which tell where a resume
starts; then the optimizer and scheduler sized to the run (:func:`prepare_run`). The
Accelerator is ``runtime``'s."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import attrs
import torch

# torch imports torch._dynamo at the first optimizer's add_param_group, and on the way
# torch.fx.wrap keeps its own frame in a local: a frame cycle whose f_back chain would hold
# every frame of the first fit (the Trainer, the module, the model) until the cycle collector
# runs. Imported here, the chain is this import's. It costs ~0.6 s that the first optimizer
# would spend anyway.
import torch._dynamo
from accelerate import Accelerator
from torch.optim import Optimizer
from torch.optim.lr_scheduler import LRScheduler
from torch.utils.data import DataLoader, Dataset, IterableDataset

from accmt_metrics import Metric

from .._errors import TrainerConfigError
from .._module import AcceleratorModule
from ..config import HyperParameters
from ..data import (
    EpochPlan,
    LoaderOptions,
    Stages,
    TokenBudgetBatchSampler,
    check_data,
    check_flattening,
    evaluation_loader,
    keep_places,
    plan_budget,
    prepare_stream_evaluation,
    samples,
    streams_split,
    train_loader,
)
from ..evaluation import MetricsOption, metrics_per_set
from ..runtime import shards_the_model

if TYPE_CHECKING:
    from accmt_state import TrainingState

    from ..runtime import AcceleratorOptions


@attrs.frozen(kw_only=True)
class PreparedData:
    """The model and loaders of one ``fit``, prepared by Accelerate: what sizes the run."""

    model: torch.nn.Module
    plan: EpochPlan
    """Which loader each epoch reads, and how many of its batches."""
    val_loaders: dict[str, DataLoader[Any]]
    val_metrics: dict[str, list[Metric]]


@attrs.define(kw_only=True)
class PreparedRun:
    """The objects of one ``fit``, prepared by Accelerate."""

    accelerator: Accelerator
    model: torch.nn.Module
    plan: EpochPlan
    val_loaders: dict[str, DataLoader[Any]]
    val_metrics: dict[str, list[Metric]]
    optimizer: Optimizer
    scheduler: LRScheduler | None
    total_steps: int
    epochs: int
    """``HyperParameters.epochs``, or for stages the passes they take (``plan``)."""
    train_batch_size: int
    """Samples per training batch on each process."""

    def reached_end(self, state: TrainingState) -> bool:
        """Whether ``state`` did all the run's epochs or its ``max_steps``: it is finished."""
        return state.epoch >= self.epochs or state.global_step >= self.total_steps


def prepare_data(
    accelerator: Accelerator,
    module: AcceleratorModule,
    hps: HyperParameters,
    datasets: tuple[Dataset[Any] | Stages, dict[str, Dataset[Any]]],
    loader_options: LoaderOptions,
    metrics: MetricsOption,
    accelerator_options: AcceleratorOptions,
) -> PreparedData:
    """The model, the training and validation loaders and each set's metrics, prepared in
    Accelerate's order (the teacher too, frozen)."""
    train_data, val_sets = datasets
    stages = train_data if isinstance(train_data, Stages) else None
    if stages is not None and hps.step_scheduler_per_epoch:
        raise TrainerConfigError(
            "HyperParameters(step_scheduler_per_epoch=True) cannot be used with stages (a "
            "curriculum): their epochs differ in length"
        )
    accelerator_options.enable_gradient_checkpointing(module.model)
    train_loaders = [
        train_loader(module, hps, loader_options, stage)
        for stage in (stages.stages if stages else [(0, train_data, {})])
    ]
    val_loaders = {
        key: evaluation_loader(module, dataset, hps, loader_options)
        for key, dataset in val_sets.items()
    }
    # A flattening collate_fn must give position_ids, or documents would attend to each other.
    for loader in train_loaders:
        check_flattening(loader, "Trainer.fit: the training data")
    for key, loader in val_loaders.items():
        check_flattening(loader, f"Trainer.fit: validation set {key!r}")
    # None: Accelerate's own placement (on the device); False: the batches stay on the CPU.
    placement = None if loader_options.batch_device_placement else False
    # A token-budget sampler plans a multiple of the processes' number of batches itself:
    # Accelerate has nothing to even out (and its 1.2 refuses, when it would, a batch sampler
    # without a batch size).
    even = accelerator.even_batches
    if any(isinstance(loader.batch_sampler, TokenBudgetBatchSampler) for loader in train_loaders):
        accelerator.even_batches = False
    try:
        with streams_split(accelerator, train_loaders, loader_options.dispatch_streams):
            model, *prepared_train = accelerator.prepare(
                module.model,
                *train_loaders,
                device_placement=None
                if placement is None
                else [None, *[False] * len(train_loaders)],
            )
    finally:
        accelerator.even_batches = even
    keep_places(accelerator, train_loaders, prepared_train)
    # Validation gives every sample once, as evaluate does (each process its batches of the
    # one-process order, the last round uneven), unless the model is split across processes
    # and every process must take part in every forward: then Accelerate evens the batches
    # out and the metrics drop the repeated samples (their loss is not exact).
    once = not shards_the_model(accelerator)
    prepared_val = {
        key: _validation_loader(accelerator, loader, placement, every_sample_once=once)
        for key, loader in val_loaders.items()
    }
    if module.teacher is not None:
        module.teacher.requires_grad_(False)
        module.teacher = accelerator.prepare_model(module.teacher, evaluation_mode=True)
        module.teacher.eval()
    module.model = model
    for loader in prepared_train:
        # A token-budget sampler plans a multiple of the processes' number of batches: its
        # length, which sizes the schedule, is then the epoch's.
        plan_budget(loader)
    accumulation = accelerator.gradient_accumulation_steps
    plan = EpochPlan.build(prepared_train, stages.end_steps if stages else None, accumulation)
    # Before the schedule is sized by the loaders' lengths: an empty one is named, not a 0.
    # The validation sets as one process reads them: with every sample once, a process may
    # have no batch of a small set, which is fine as long as the set has one.
    check_data(plan.loaders, val_loaders)
    if plan.batches_per_epoch is None and hps.max_steps is None:
        raise TrainerConfigError(
            "Trainer.fit: the training loader has no length (a stream without __len__), so the "
            "run cannot tell how many optimizer steps it takes; give "
            "HyperParameters(max_steps=...)"
        )
    return PreparedData(
        model=model,
        plan=plan,
        val_loaders=prepared_val,
        val_metrics=metrics_per_set(
            metrics, {k: None if once else samples(val_loaders[k]) for k in val_sets}
        ),
    )


def prepare_run(
    accelerator: Accelerator,
    module: AcceleratorModule,
    hps: HyperParameters,
    data: PreparedData,
    step_offset: int,
) -> PreparedRun:
    """The run around ``data``: its length, and the optimizer and scheduler sized to it.
    ``step_offset`` is how far the run's ``global_step`` is from what this number of
    processes counts from the first step (a resume on another number of processes, see
    ``checkpointing/_resize``): the schedule spans the steps done plus the steps left here."""
    plan, accumulation = data.plan, accelerator.gradient_accumulation_steps
    batches = plan.batches_per_epoch
    total_steps = hps.max_steps or 0
    if batches is not None:  # a stream without a length: its epochs end where it ends
        total_steps = hps.epochs * math.ceil(batches / accumulation) + step_offset
        if hps.max_steps is not None:
            total_steps = min(total_steps, hps.max_steps)
    if plan.layout is not None:
        total_steps = plan.layout.end_steps[-1]
    epochs = hps.epochs if plan.layout is None else plan.layout.epochs
    optimizer, scheduler = _optimization(
        accelerator, module, data.model, hps, (total_steps, epochs)
    )
    return PreparedRun(
        accelerator=accelerator,
        model=data.model,
        plan=plan,
        val_loaders=data.val_loaders,
        val_metrics=data.val_metrics,
        optimizer=optimizer,
        scheduler=scheduler,
        total_steps=total_steps,
        epochs=epochs,
        train_batch_size=hps.train_batch_size,
    )


def _validation_loader(
    accelerator: Accelerator,
    loader: DataLoader[Any],
    placement: bool | None,
    *,
    every_sample_once: bool,
) -> DataLoader[Any]:
    """``loader`` prepared with or without Accelerate's even batches (a setting it reads when
    it prepares a loader), the Accelerator's own setting left as it was for training."""
    stream = isinstance(loader.dataset, IterableDataset)
    if every_sample_once and stream and accelerator.num_processes > 1:
        return prepare_stream_evaluation(accelerator, loader, placement)
    even = accelerator.even_batches
    accelerator.even_batches = not every_sample_once
    try:
        prepared: DataLoader[Any] = accelerator.prepare_data_loader(
            loader, device_placement=placement
        )
    finally:
        accelerator.even_batches = even
    return prepared


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
