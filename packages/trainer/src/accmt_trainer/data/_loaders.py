"""The loaders the Trainer builds where the module builds none: the training loader of a
dataset or of a curriculum's stage, and the loader of a set to validate, evaluate or predict;
and how many samples a loader gives without drawing from it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs
from torch.utils.data import BatchSampler, DataLoader, Dataset, IterableDataset, Sampler

from .._errors import TrainerConfigError
from .._module import AcceleratorModule, overrides
from ..config import HyperParameters
from ._checks import check_token_budget
from ._curriculum import Stage

DEFAULT_SET = "validation"


@attrs.frozen(kw_only=True)
class LoaderOptions:
    """How the Trainer builds the loaders a module does not build itself: the training loader
    from ``sampler`` / ``batch_sampler`` / ``collate_fn``, each validation loader from the
    ``val_`` ones (``val_collate_fn`` defaults to ``collate_fn``). A batch sampler makes the
    batches: the batch size, shuffling and ``drop_last`` are then its own."""

    dataloader_num_workers: int = 0
    dataloader_pin_memory: bool = False
    dataloader_drop_last: bool = False
    """Drop the last incomplete training batch."""
    shuffle_train: bool | None = None
    """None shuffles a map-style dataset and leaves a stream (an IterableDataset) in its order:
    a stream has no indices to shuffle."""
    sampler: Sampler[Any] | None = None
    batch_sampler: BatchSampler | Sampler[list[Any]] | None = None
    collate_fn: Callable[[list[Any]], Any] | None = None
    val_sampler: Sampler[Any] | None = None
    val_batch_sampler: BatchSampler | Sampler[list[Any]] | None = None
    val_collate_fn: Callable[[list[Any]], Any] | None = None
    batch_device_placement: bool = True
    """False leaves batches where the loader made them (on the CPU); the module moves them."""
    dispatch_streams: bool = False
    """How a training stream is split across processes: False, every process reads it and
    keeps its own share of each round of batches (Accelerate's ``IterableDatasetShard``; a
    ``datasets.IterableDataset`` with enough shards is split by shard instead); True, the main
    process alone reads it and sends each process its batch (the batches must then have one
    shape)."""

    def __attrs_post_init__(self) -> None:
        pairs = (("sampler", "batch_sampler"), ("val_sampler", "val_batch_sampler"))
        for sampler, batch_sampler in pairs:
            if getattr(self, sampler) is not None and getattr(self, batch_sampler) is not None:
                raise TrainerConfigError(
                    f"Trainer({sampler}=..., {batch_sampler}=...): a batch sampler chooses the "
                    f"samples itself; give only one of them"
                )


def train_loader(
    module: AcceleratorModule, hps: HyperParameters, options: LoaderOptions, stage: Stage
) -> DataLoader[Any]:
    """The loader of one dataset, or of one stage with its own DataLoader keyword arguments."""
    _, dataset, loader_kwargs = stage
    loader = module.get_train_dataloader(dataset)
    if loader is None:
        try:
            loader = _loader(
                module,
                dataset,
                hps.train_batch_size,
                options,
                train=True,
                loader_kwargs=loader_kwargs,
            )
        except (TypeError, ValueError) as error:
            if not loader_kwargs:
                raise
            raise TrainerConfigError(
                f"Trainer.fit(train_dataset=...): a stage's dataloader_kwargs {loader_kwargs!r} "
                f"do not make a DataLoader: {error}"
            ) from error
    check_token_budget(loader, "batch_sampler")
    return loader


def evaluation_loader(
    module: AcceleratorModule, dataset: Dataset[Any], hps: HyperParameters, options: LoaderOptions
) -> DataLoader[Any]:
    """The loader of a set to evaluate or predict: the module's own, else the Trainer's."""
    loader = module.get_validation_dataloader(dataset)
    if loader is None:
        loader = _loader(module, dataset, hps.val_batch_size, options, train=False)
    check_token_budget(loader, "val_batch_sampler")
    return loader


def named_sets(
    val_dataset: Dataset[Any] | Mapping[str, Dataset[Any]] | None, default: str = DEFAULT_SET
) -> dict[str, Dataset[Any]]:
    if val_dataset is None:
        return {}
    if isinstance(val_dataset, Mapping):
        return dict(val_dataset)
    return {default: val_dataset}


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
        "num_workers": options.dataloader_num_workers,
        "pin_memory": options.dataloader_pin_memory,
    }
    batch_sampler = options.batch_sampler if train else options.val_batch_sampler
    sampler = options.sampler if train else options.val_sampler
    if batch_sampler is not None:
        common["batch_sampler"] = batch_sampler
    else:
        common.update(
            batch_size=batch_size,
            sampler=sampler,
            drop_last=train and options.dataloader_drop_last,
            shuffle=(
                train
                and sampler is None
                and options.shuffle_train is not False
                and not isinstance(dataset, IterableDataset)
            ),
        )
    return DataLoader(dataset, **{**common, **(loader_kwargs or {})})


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
