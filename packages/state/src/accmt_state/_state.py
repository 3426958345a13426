"""TrainingState: every counter and flag of a run, with validators on every assignment."""

from __future__ import annotations

import math
import os
from typing import Any

import attrs
from attrs import define, field, setters

from . import _codec
from ._errors import StateTypeError
from ._migrations import SCHEMA_VERSION
from ._validators import (
    as_float,
    boolean,
    count,
    current_schema,
    floating,
    keyed_by_str,
    optional,
    real_number,
    rule,
    text,
)


def _count() -> int:
    return field(default=0, validator=rule(count))


def _flag() -> bool:
    return field(default=False, validator=rule(boolean))


def _loss() -> float:
    return field(default=math.inf, converter=as_float, validator=rule(floating))


@define(on_setattr=[setters.convert, setters.validate])
class TrainingState:
    """Everything a training run has counted, in a form that survives a restart.

    Assignments are validated (``state.global_step = -1`` raises StateError, a ValueError;
    ``= True`` raises StateTypeError, a TypeError), and so are loaded files. A loop mutates the
    fields directly or with :meth:`update`; :meth:`save` and :meth:`load` write and read the JSON
    file.

    Attributes:
        batch_iteration: Batch iteration index, incremented every time a train step is done.
            It ignores gradient accumulation; without accumulation it equals ``global_step``.
        global_step: Global step index, incremented every time a train step and a gradient
            accumulation step are done (that is, on every optimizer step).
        train_step: Training step index inside the training loop (the batch index).
        val_step: Validation step index inside an evaluation loop (the batch index).
        epoch: Epoch index.
        is_end_of_epoch: Whether the current state is at the end of an epoch.
        is_last_training_batch: Whether the last training batch of the epoch is being processed.
        is_last_validation_batch: Whether the last validation batch is being processed.
        is_last_epoch: Whether the last epoch is being processed.
        evaluations_done: Number of evaluations done.
        additional_metrics: Additional metrics per evaluation dataset, e.g.
            ``{"validation": {"accuracy": 0.91, "valid_loss": 0.3}}``. Values may be any JSON
            data; numpy and torch scalars are written as plain numbers.
        model_savings: The best value reached so far per model-saving rule,
            e.g. ``{"best_valid_loss": 0.3, "accuracy": 0.91}``.
        patience_left: Evaluations left without improvement, per model-saving rule that has a
            patience (a rule without one has no entry).
        best_train_loss: Best training loss achieved.
        best_valid_loss: Best validation loss achieved.
        finished: Whether the run has already finished.
        num_checkpoints_made: Number of checkpoints made.
        batches_seen_in_epoch: Training batches this process consumed in the current epoch;
            a resume skips exactly these.
        last_evaluation_step: The ``global_step`` of the latest evaluation (None before the
            first), so that the same weights are never evaluated twice.
        skipped_steps: Optimizer steps skipped because the loss or the gradients were not
            finite (``Trainer(on_nonfinite_loss="skip")``).
        train_dataloader_idx: The index of the current curriculum stage (its training
            loader); 0 without a curriculum. Kept across a resume.
        stop_reason: Why the run stopped before its end: the first stop request's reason on
            this process (``"received SIGTERM"``, a callback's, ``"a stop was asked on another
            process"``); None while it runs, once it finished, and again when it resumes.
        stop_signal: The name of the signal that stopped the run (``"SIGUSR1"``), whichever
            process received it, the same on every process; None when no signal stopped it. A
            run stopped by a signal is to be resumed: ``accmt_trainer.exit_status`` reads it.
        schema_version: The file schema this state is written in; always the current one.
    """

    batch_iteration: int = _count()
    global_step: int = _count()
    train_step: int = _count()
    val_step: int = _count()
    epoch: int = _count()
    is_end_of_epoch: bool = _flag()
    is_last_training_batch: bool = _flag()
    is_last_validation_batch: bool = _flag()
    is_last_epoch: bool = _flag()
    evaluations_done: int = _count()
    additional_metrics: dict[str, dict[str, Any]] = field(
        factory=dict, validator=rule(keyed_by_str(keyed_by_str()))
    )
    model_savings: dict[str, float] = field(factory=dict, validator=rule(keyed_by_str(real_number)))
    patience_left: dict[str, int] = field(factory=dict, validator=rule(keyed_by_str(count)))
    best_train_loss: float = _loss()
    best_valid_loss: float = _loss()
    finished: bool = _flag()
    num_checkpoints_made: int = _count()
    batches_seen_in_epoch: int = _count()
    last_evaluation_step: int | None = field(default=None, validator=rule(optional(count)))
    skipped_steps: int = _count()
    train_dataloader_idx: int = _count()
    stop_reason: str | None = field(default=None, validator=rule(optional(text)))
    stop_signal: str | None = field(default=None, validator=rule(optional(text)))
    schema_version: int = field(
        default=SCHEMA_VERSION, validator=rule(current_schema), on_setattr=setters.frozen
    )

    def update(self, **changes: Any) -> None:
        """Set several fields at once by keyword. Unknown names raise StateTypeError; every value
        is validated before any is set, so a bad one leaves the state unchanged."""
        unknown = sorted(set(changes) - _UPDATABLE)
        if unknown:
            names = ", ".join(unknown)
            raise StateTypeError(f"TrainingState.update() got unknown or read-only fields: {names}")
        checked = attrs.evolve(self, **changes)
        for name in changes:
            setattr(self, name, getattr(checked, name))

    def to_dict(self) -> dict[str, Any]:
        """The state as plain JSON-ready data (non-finite floats tagged), as the file holds it."""
        return _codec.state_to_dict(self)

    @classmethod
    def from_dict(cls, data: Any, *, lenient: bool = False) -> TrainingState:
        """The state that ``data`` (of any known schema version) describes.

        Raises StateError naming every bad field. With ``lenient=True``, fields this version
        does not know, and a newer schema version, are ignored with a warning.
        """
        return _codec.state_from_dict(cls, data, lenient=lenient)

    def save(self, path: str | os.PathLike[str], *, durable: bool = True) -> None:
        """Write the state to ``path`` as strict JSON, atomically and (unless
        ``durable=False``, see :func:`accmt_state.write_json`) durably."""
        _codec.save_state(self, path, durable=durable)

    @classmethod
    def load(cls, path: str | os.PathLike[str], *, lenient: bool = False) -> TrainingState:
        """Read a state file written by any version of accmt (1.x included).

        Raises StateError naming the file and every bad field; ``lenient`` as for from_dict.
        """
        return _codec.load_state(cls, path, lenient=lenient)


_UPDATABLE = frozenset(attrs.fields_dict(TrainingState)) - {"schema_version"}
_codec.register(TrainingState)
