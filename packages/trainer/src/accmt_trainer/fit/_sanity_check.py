"""The names check before the first training step, so that a mistake costs a second, not an
epoch: every value a saving rule, a patience or an EarlyStopping watches is one a validation set
reports. (Empty data is ``data``'s check, unwritable folders ``checkpointing``'s.)"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from accmt_callbacks import Callback, EarlyStopping

from .._errors import TrainerConfigError
from ..checkpointing import TRAIN_LOSS, VALID_LOSS, SavingRule
from ..config import suggest


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
