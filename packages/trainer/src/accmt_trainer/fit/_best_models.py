"""Best models and patience: one judgement per rule, which both saving and patience use.

Each rule's best values live in ``state.model_savings``, and the evaluations each rule may
still go without improving in ``state.patience_left``: both are checkpointed with the state.
When a rule's patience runs out, the run ends through the ordinary stop request. A PEFT
model's best models are its adapter folders (``checkpointing/_adapters.py``).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import torch
from accelerate import Accelerator

from accmt_state import write_json

from .._errors import TrainerConfigError
from ..checkpointing import (
    SavingRule,
    is_peft_model,
    parse_rule,
    recover_folder,
    replace_folder,
    save_adapter,
    tied_weights_unannounced,
)
from ..config import check_patience, check_shard_size
from ..runtime import own_model, shards_the_model
from ._nonfinite import NonFiniteGuard

if TYPE_CHECKING:
    from accmt_state import TrainingState

_METRICS = "metrics.json"


def _shard_size(instance: Any, attribute: attrs.Attribute[Any], value: int | str) -> None:
    check_shard_size(value)


@attrs.frozen(kw_only=True)
class BestModelOptions:
    """The Trainer's options of best models and patience, checked when the Trainer is made."""

    disable_model_saving: bool = False
    """Save no best model (the rules are still judged for patience)."""
    max_shard_size: int | str = attrs.field(default="10GB", validator=_shard_size)
    """The largest safetensors file of a saved model: bytes, or a size such as ``"10GB"``."""
    patience: int | dict[str, int] | None = attrs.field(default=None, converter=check_patience)
    """Evaluations without improvement before the run stops: for every rule, or by rule."""
    save_merged: bool = False
    """A PEFT model's best models also hold the merged full model (``merge_and_unload`` on a
    copy) in ``merged/``, which transformers' ``from_pretrained`` loads."""


class BestModels:
    """Judges every rule after each evaluation (and the train-loss rules after each epoch),
    writes the model of each rule that improved, and counts each rule's patience; when one runs
    out, it calls ``request_stop``. A PEFT model's best models are PEFT adapter folders."""

    def __init__(
        self,
        accelerator: Accelerator,
        model: torch.nn.Module,
        state: TrainingState,
        rules: list[SavingRule],
        options: BestModelOptions,
        *,
        model_path: Path,
        greater_is_better: Callable[[str], bool],
        nonfinite_guard: NonFiniteGuard,
        request_stop: Callable[[str], None],
    ) -> None:
        self.accelerator = accelerator
        self.model = model
        self.state = state
        self.rules = rules
        self.model_path = model_path
        self.greater_is_better = greater_is_better
        self.nonfinite_guard = nonfinite_guard
        self.max_shard_size = options.max_shard_size
        self.save_merged = options.save_merged
        self.adapters = is_peft_model(own_model(model))
        """Whether the model is a PEFT model (checked as the fit starts: ``check_peft_model``),
        whose best models are its adapters."""
        self.patience = patience_per_rule(options.patience, rules)
        self.request_stop = request_stop
        # A fresh run starts with every patience whole; a resumed one keeps what it had left.
        state.patience_left = {**self.patience, **state.patience_left}
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
        state = self.state
        for rule in self.rules:
            if rule.uses_train_loss != train_loss_rules:
                continue
            values = rule.values(state, train_loss)
            saved = state.model_savings
            best = {k: saved[best_key(rule, k)] for k in values if best_key(rule, k) in saved}
            improved = rule.improves(values, best, self.greater_is_better)
            if improved:
                news = {best_key(rule, key): value for key, value in values.items()}
                state.model_savings = {**saved, **news}
                self._write(rule, values)
            if rule.name in self.patience:
                self._count_patience(rule.name, improved)

    def _count_patience(self, rule: str, improved: bool) -> None:
        patience = self.patience[rule]
        left = patience if improved else max(self.state.patience_left[rule] - 1, 0)
        self.state.patience_left = {**self.state.patience_left, rule: left}
        if left == 0:
            self.request_stop(f"patience: {rule} has not improved for {patience} evaluation(s)")

    def _write(self, rule: SavingRule, values: Mapping[str, float]) -> None:
        self.nonfinite_guard.check(self.model.parameters())
        folder = self.model_path / rule.folder
        staging = _staging(folder)
        accelerator = self.accelerator
        if accelerator.is_main_process:
            shutil.rmtree(staging, ignore_errors=True)
            staging.mkdir(parents=True)
        accelerator.wait_for_everyone()
        if self.adapters:
            save_adapter(
                self.model,
                staging,
                accelerator,
                merged=self.save_merged,
                max_shard_size=self.max_shard_size,
            )
        else:
            self._save_model(staging)
        # Every process must be done with the staging folder before it is renamed.
        accelerator.wait_for_everyone()
        if accelerator.is_main_process:
            # Not fsynced one by one: replace_folder syncs the whole folder before the old
            # version goes.
            self.state.save(staging / "state.json", durable=False)
            # Written last: a staging folder that holds it is complete.
            metrics = {"rule": rule.name, "values": dict(values)}
            write_json(staging / _METRICS, metrics, durable=False)
            replace_folder(staging, folder)
        accelerator.wait_for_everyone()

    def _save_model(self, staging: Path) -> None:
        accelerator = self.accelerator
        with tied_weights_unannounced():
            accelerator.save_model(
                _saved(self.model, accelerator),
                str(staging),
                max_shard_size=self.max_shard_size,
                safe_serialization=True,
            )


def _staging(folder: Path) -> Path:
    return folder.with_name(f".tmp-{folder.name}")


def best_key(rule: SavingRule, key: str) -> str:
    """Where a rule keeps the best value of one part in ``state.model_savings``."""
    return rule.name if len(rule.watched) == 1 else f"{rule.name}::{key}"


def choose_rules(
    registered: Mapping[str, SavingRule], disabled: bool, has_validation: bool
) -> list[SavingRule]:
    """The rules of a run: those registered, else the validation (or train) loss."""
    if disabled:
        return []
    if registered:
        return list(registered.values())
    return [parse_rule("best_valid_loss" if has_validation else "best_train_loss")]


def patience_per_rule(
    patience: int | Mapping[str, int] | None, rules: list[SavingRule]
) -> dict[str, int]:
    """Each rule's patience; naming a rule the run does not have is an error."""
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


def _saved(model: torch.nn.Module, accelerator: Accelerator) -> torch.nn.Module:
    """What a best model saves: the user's own model, so that its names are the model's with or
    without ``compile=True`` (a compiled model's would start with ``_orig_mod.``). A model split
    across processes is saved through its wrapper, which gathers it."""
    if shards_the_model(accelerator):
        return model
    return own_model(model)
