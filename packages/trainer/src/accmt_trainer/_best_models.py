"""Best models and patience: one judgement per rule, which both saving and patience use.

Each rule's best values live in ``state.model_savings``. ``patience`` is an
:class:`accmt_callbacks.EarlyStopping` per rule (:class:`RulePatience`), fed the same
judgement that decides whether the rule's model is saved; its count is kept in the callbacks'
checkpointed state and mirrored into ``state.patience_left``, and it ends the run through the
ordinary stop request.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from accelerate import Accelerator
from accelerate.utils import convert_file_size_to_int

from accmt_callbacks import Callback, CallbackHandler, EarlyStopping
from accmt_state import write_json

from ._errors import TrainerConfigError
from ._folders import recover_folder, replace_folder
from ._nonfinite import NonFiniteGuard
from ._saving_rules import SavingRule, parse_rule

if TYPE_CHECKING:
    from accmt_state import TrainingState

_METRICS = "metrics.json"


class RulePatience(EarlyStopping):
    """Patience for one saving rule: :class:`BestModels` records each judgement of the rule;
    after ``patience`` in a row without improvement, it requests a stop."""

    def __init__(self, rule: str, patience: int) -> None:
        super().__init__(monitor=rule, patience=patience)

    def on_evaluation_end(self) -> None:
        """Nothing: :class:`BestModels` records the rule's judgement when it is made."""


class BestModels:
    """Judges every rule after each evaluation (and the train-loss rules after each epoch),
    writes the model of each rule that improved, and feeds each rule's patience."""

    def __init__(
        self,
        accelerator: Accelerator,
        model: torch.nn.Module,
        state: TrainingState,
        rules: list[SavingRule],
        patience: Mapping[str, int],
        *,
        model_path: Path,
        greater_is_better: Callable[[str], bool],
        guard: NonFiniteGuard,
        max_shard_size: int | str = "10GB",
    ) -> None:
        self.accelerator = accelerator
        self.model = model
        self.state = state
        self.rules = rules
        self.model_path = model_path
        self.greater_is_better = greater_is_better
        self.guard = guard
        self.max_shard_size = max_shard_size
        self.patience = {name: RulePatience(name, count) for name, count in patience.items()}
        if accelerator.is_main_process:
            for rule in rules:
                folder = model_path / rule.folder
                recover_folder(folder, _staging(folder), complete=_METRICS)
        accelerator.wait_for_everyone()

    def after_evaluation(self) -> None:
        self._judge(train_loss_rules=False, train_loss=None)

    def after_epoch(self, train_loss: float | None) -> None:
        self._judge(train_loss_rules=True, train_loss=train_loss)

    def _judge(self, *, train_loss_rules: bool, train_loss: float | None) -> None:
        saved = self.state.model_savings
        for rule in self.rules:
            if rule.uses_train_loss != train_loss_rules:
                continue
            values = rule.values(self.state, train_loss)
            best = {k: saved[best_key(rule, k)] for k in values if best_key(rule, k) in saved}
            improved = rule.improves(values, best, self.greater_is_better)
            if improved:
                for key, value in values.items():
                    saved[best_key(rule, key)] = value
                self._write(rule, values)
            patience = self.patience.get(rule.name)
            if patience is not None:
                patience.record(None, improved=improved)

    def _write(self, rule: SavingRule, values: Mapping[str, float]) -> None:
        self.guard.check(self.model.parameters())
        folder = self.model_path / rule.folder
        staging = _staging(folder)
        accelerator = self.accelerator
        if accelerator.is_main_process:
            shutil.rmtree(staging, ignore_errors=True)
            staging.mkdir(parents=True)
        accelerator.wait_for_everyone()
        accelerator.save_model(
            self.model, str(staging), max_shard_size=self.max_shard_size, safe_serialization=True
        )
        # Every process must be done with the staging folder before it is renamed.
        accelerator.wait_for_everyone()
        if accelerator.is_main_process:
            self.state.save(staging / "state.json")
            # Written last: a staging folder that holds it is complete.
            write_json(staging / _METRICS, {"rule": rule.name, "values": dict(values)})
            replace_folder(staging, folder)
        accelerator.wait_for_everyone()


def _staging(folder: Path) -> Path:
    return folder.with_name(f".tmp-{folder.name}")


def best_key(rule: SavingRule, key: str) -> str:
    """Where a rule keeps the best value of one part in ``state.model_savings``."""
    return rule.name if len(rule.watched) == 1 else f"{rule.name}::{key}"


def user_callbacks(callbacks: CallbackHandler) -> list[Callback]:
    """The callbacks of ``callbacks`` that are not a saving rule's patience."""
    return [c for c in callbacks.callbacks if not isinstance(c, RulePatience)]


def choose_rules(
    registered: Mapping[str, SavingRule], disabled: bool, has_validation: bool
) -> list[SavingRule]:
    """The rules of a run: those registered, else the validation (or train) loss."""
    if disabled:
        return []
    if registered:
        return list(registered.values())
    return [parse_rule("best_valid_loss" if has_validation else "best_train_loss")]


def check_shard_size(value: int | str) -> int | str:
    """``max_shard_size``: bytes, or a size such as ``"10GB"`` or ``"500MB"``."""
    try:
        valid = convert_file_size_to_int(value) > 0 and not isinstance(value, bool)
    except (ValueError, TypeError, AttributeError):
        valid = False
    if not valid:
        raise TrainerConfigError(
            f"Trainer(max_shard_size=...): expected a number of bytes or a size such as "
            f"'10GB' or '500MB', got {value!r}"
        )
    return value


def patience_per_rule(
    patience: int | Mapping[str, int] | None, rules: list[SavingRule]
) -> dict[str, int]:
    if patience is None:
        return {}
    if isinstance(patience, int):
        return {rule.name: patience for rule in rules}
    unknown = set(patience) - {rule.name for rule in rules}
    if unknown:
        raise TrainerConfigError(
            f"Trainer(patience=...): no model saving rule named {sorted(unknown)}; the "
            f"rules are {[rule.name for rule in rules]}"
        )
    return dict(patience)
