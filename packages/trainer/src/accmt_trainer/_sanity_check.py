"""What is checked before the first training step, so that a mistake costs a second, not an
epoch: empty data, folders that cannot be written, and names that nothing reports."""

from __future__ import annotations

import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from accmt_callbacks import Callback, EarlyStopping

from ._errors import TrainerConfigError
from ._module import AcceleratorModule
from ._option_checks import suggest
from ._saving_rules import TRAIN_LOSS, VALID_LOSS, SavingRule


def check_module(module: AcceleratorModule, call: str = "Trainer.fit") -> None:
    """The module of ``call``: an AcceleratorModule whose ``model`` is set."""
    if not isinstance(module, AcceleratorModule):
        raise TypeError(f"{call}: module must be an AcceleratorModule, got {module!r}")
    if not isinstance(getattr(module, "model", None), torch.nn.Module):
        raise TrainerConfigError(
            f"{call}: {type(module).__name__}.model must be set to a torch.nn.Module first"
        )


def check_datasets(train_dataset: Any, val_sets: Mapping[str, Any]) -> None:
    """No dataset with a length may be empty (a shuffling loader refuses one obscurely)."""
    for where, dataset in [("train_dataset", train_dataset), *val_sets.items()]:
        try:
            empty = len(dataset) == 0
        except TypeError:
            continue
        if empty:
            named = "train_dataset" if where == "train_dataset" else f"validation set {where!r}"
            raise TrainerConfigError(f"Trainer.fit: {named} is empty (0 samples)")


def check_data(train_loaders: Sequence[Any], val_loaders: Mapping[str, Any]) -> None:
    """No loader of the run may be empty (``train_loaders``: one, or one per stage)."""
    for stage, train_loader in enumerate(train_loaders):
        if len(train_loader) == 0:
            which = f"stage {stage} of " if len(train_loaders) > 1 else ""
            raise TrainerConfigError(
                f"Trainer.fit(train_dataset=...): {which}the training data gives no batch "
                f"({_size(train_loader)}); give it samples, or a smaller batch size or "
                "dataloader_drop_last=False"
            )
    for key, loader in val_loaders.items():
        if len(loader) == 0:
            raise TrainerConfigError(
                f"Trainer.fit(val_dataset=...): validation set {key!r} gives no batch "
                f"({_size(loader)}); give it samples, or leave it out"
            )


def check_writable(folders: Iterable[tuple[str, Path]]) -> None:
    """Each ``(option, folder)`` can be made and written to, by this process."""
    for option, folder in folders:
        try:
            folder.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=folder, prefix=".accmt-write-test-"):
                pass
        except OSError as error:
            raise TrainerConfigError(
                f"Trainer({option}={str(folder)!r}): the folder cannot be written: {error}"
            ) from error


def check_names(
    reported: Mapping[str, Sequence[str]],
    rules: Sequence[SavingRule],
    callbacks: Sequence[Callback],
) -> None:
    """Every value a saving rule, a patience or an EarlyStopping watches is one the validation
    sets reported on their first batch (``reported``: set -> names)."""
    for rule in rules:
        for part in rule.watched:
            if part.metric == TRAIN_LOSS:
                continue
            name = "loss" if part.metric == VALID_LOSS else part.metric
            _check_name(f"register_model_saving({rule.name!r})", name, part.dataset, reported)
    for index, callback in enumerate(callbacks):
        if isinstance(callback, EarlyStopping) and type(callback).on_evaluation_end is (
            EarlyStopping.on_evaluation_end
        ):
            name, at, dataset = callback.monitor.rpartition("@")
            if not at:
                name, dataset = dataset, ""
            where = f"callbacks[{index}] EarlyStopping(monitor={callback.monitor!r})"
            _check_name(where, name, dataset or None, reported)


def _check_name(
    where: str, name: str, dataset: str | None, reported: Mapping[str, Sequence[str]]
) -> None:
    if not reported:
        raise TrainerConfigError(f"{where} watches {name!r}, but the run has no validation data")
    if dataset is not None:
        if dataset not in reported:
            raise TrainerConfigError(
                f"{where}: no validation set named {dataset!r}; the sets are "
                f"{sorted(reported)}{suggest(dataset, reported)}"
            )
        names: Iterable[str] = reported[dataset]
    else:
        names = {found for values in reported.values() for found in values}
    if name not in names:
        on = f"validation set {dataset!r}" if dataset else "any validation set"
        raise TrainerConfigError(
            f"{where} watches {name!r}, but {on} reports only {sorted(names)}"
            f"{suggest(name, names)}; validation_step returns the loss as 'loss' and each "
            "metric under its name"
        )


def _size(loader: Any) -> str:
    dataset = getattr(loader, "dataset", None)
    try:
        samples = f"{len(dataset)} samples" if dataset is not None else "unknown size"
    except TypeError:
        samples = "unknown size"
    return f"{samples}, batch size {getattr(loader, 'batch_size', '?')}"
