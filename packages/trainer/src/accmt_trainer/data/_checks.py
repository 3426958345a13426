"""The data checks before anything is written: no dataset or loader of a run may be empty (an
empty dataset is named by where it was given; a shuffling loader would refuse it obscurely),
and a loader batched by token budget has the dataset and the collator its sampler needs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .._errors import TrainerConfigError
from ._token_budget import budget_sampler


def check_not_empty(dataset: Any, what: str) -> None:
    """``dataset`` has samples, where it can say how many (a stream without a length can't):
    else ``"<what> is empty (0 samples)"``."""
    try:
        empty = len(dataset) == 0
    except TypeError:
        return
    if empty:
        raise TrainerConfigError(f"{what} is empty (0 samples)")


def check_datasets(train_dataset: Any, val_sets: Mapping[str, Any]) -> None:
    """``Trainer.fit``'s datasets, each with samples."""
    check_not_empty(train_dataset, "Trainer.fit: train_dataset")
    for key, dataset in val_sets.items():
        check_not_empty(dataset, f"Trainer.fit: validation set {key!r}")


def check_data(train_loaders: Sequence[Any], val_loaders: Mapping[str, Any]) -> None:
    """No loader of the run may be empty (``train_loaders``: one, or one per stage)."""
    for stage, train_loader in enumerate(train_loaders):
        if _length(train_loader) == 0:
            which = f"stage {stage} of " if len(train_loaders) > 1 else ""
            raise TrainerConfigError(
                f"Trainer.fit(train_dataset=...): {which}the training data gives no batch "
                f"({_size(train_loader)}); give it samples, or a smaller batch size or "
                "dataloader_drop_last=False"
            )
    for key, loader in val_loaders.items():
        if _length(loader) == 0:
            raise TrainerConfigError(
                f"Trainer.fit(val_dataset=...): validation set {key!r} gives no batch "
                f"({_size(loader)}); give it samples, or leave it out"
            )


def check_token_budget(loader: Any, option: str) -> None:
    """A loader whose batches a ``TokenBudgetBatchSampler`` (given as ``option``) makes: one
    length per sample of its dataset, and with ``packed=True`` a collate function that joins
    a batch's samples into one row, which says so with a true ``flattens_sequences`` attribute
    (accmt-collators' ``DataCollatorWithFlattening`` does; so may a user's own)."""
    sampler = budget_sampler(loader)
    if sampler is None:
        return
    dataset = getattr(loader, "dataset", None)
    try:
        size = len(dataset) if dataset is not None else None
    except TypeError:
        size = None
    if size is not None and size != len(sampler.lengths):
        raise TrainerConfigError(
            f"Trainer({option}={sampler!r}): it has {len(sampler.lengths)} lengths but the "
            f"dataset it batches ({type(dataset).__name__}) has {size} samples; give one "
            "length per sample"
        )
    collate = getattr(loader, "collate_fn", None)
    if sampler.packed and not flattens(collate):
        name = getattr(collate, "__qualname__", None) or type(collate).__qualname__
        raise TrainerConfigError(
            f"Trainer({option}={sampler!r}): packed=True counts a batch as the sum of its "
            f"lengths, but the collate function {name} does not join a batch's samples into "
            "one row (it has no flattens_sequences = True), so it would pad them and compute "
            "more than max_tokens; give collate_fn=accmt_collators."
            "DataCollatorWithFlattening(), or packed=False"
        )


def _size(loader: Any) -> str:
    dataset = getattr(loader, "dataset", None)
    try:
        samples = f"{len(dataset)} samples" if dataset is not None else "unknown size"
    except TypeError:
        samples = "unknown size"
    return f"{samples}, batch size {getattr(loader, 'batch_size', '?')}"


def _length(loader: Any) -> int | None:
    """A loader's batches, or None for a stream without a length (it may still be empty)."""
    try:
        return len(loader)
    except TypeError:
        return None


def flattens(collate_fn: object) -> bool:
    """Whether ``collate_fn`` joins a batch's samples into rows, as it says with a true
    ``flattens_sequences`` attribute (accmt-collators' ``DataCollatorWithFlattening`` does; so
    may a user's own). Read by duck typing: accmt-trainer does not import accmt-collators."""
    return getattr(collate_fn, "flattens_sequences", False) is True


def check_flattening(loader: object, where: str) -> None:
    """A loader whose collate_fn says it flattens (``flattens_sequences``) must give
    ``position_ids``. ``where`` names the loader's data in the error (``"Trainer.fit: the
    training data"``)."""
    collate_fn = getattr(loader, "collate_fn", None)
    if not flattens(collate_fn):
        return
    if getattr(collate_fn, "return_position_ids", True) is False:
        raise TrainerConfigError(
            f"{where}: its collate_fn {type(collate_fn).__name__} flattens batches with "
            "return_position_ids=False, so a model would see each row as one sequence: every "
            "document would attend to the ones before it and take positions after theirs; "
            "make it with return_position_ids=True"
        )
