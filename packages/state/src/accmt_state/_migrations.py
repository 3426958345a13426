"""Schema versions of the state file, and the registered steps that bring old ones forward.

Version 1 is accmt 1.x's ``state.json``: the TrainingState fields written by ``json.dump``
(bare ``Infinity`` included), with no ``schema_version`` key. Version 2 adds the fields exact
mid-epoch resume needs and the ``schema_version`` key itself. Version 3 drops the fields that
nothing read (``samples_seen_in_epoch``, ``sampler_seed``, and ``train_dataloader_idx``, since
accmt 2 then had one training loader) and adds ``last_evaluation_step`` and ``skipped_steps``.
Version 4 brings back ``train_dataloader_idx``, the index of the curriculum stage. Version 5
adds ``stop_reason`` and ``stop_signal``, what stopped a run before its end.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._converter import describe
from ._errors import StateError, StateMigrationError, StateTypeError, fields_error

SCHEMA_VERSION = 5
"""The schema version this accmt-state writes; files of older versions are migrated on load."""

Migration = Callable[[dict[str, Any]], dict[str, Any]]
_MIGRATIONS: dict[int, Migration] = {}


def register_migration(from_version: int) -> Callable[[Migration], Migration]:
    """Register ``function(data) -> data`` as the step from ``from_version`` to the next version.

    The function receives a copy of the file's top-level object and returns the object as the
    next version writes it; ``schema_version`` is set for it. Each version has one step.
    """
    if isinstance(from_version, bool) or not isinstance(from_version, int):
        raise StateTypeError(f"from_version must be an int, got {from_version!r}")
    if not 1 <= from_version < SCHEMA_VERSION:
        raise StateMigrationError(
            f"from_version must be between 1 and {SCHEMA_VERSION - 1}: schema {SCHEMA_VERSION} "
            f"is current, so a migration from {from_version} would never run"
        )

    def register(function: Migration) -> Migration:
        if from_version in _MIGRATIONS:
            taken = _MIGRATIONS[from_version].__qualname__
            raise StateMigrationError(
                f"a migration from schema {from_version} is already registered: {taken}"
            )
        _MIGRATIONS[from_version] = function
        return function

    return register


def version_of(data: Any) -> int:
    """The schema version a top-level state object declares (1 when it has no such key)."""
    if not isinstance(data, dict):
        raise StateTypeError(f"expected an object, got {describe(data)}")
    version = data.get("schema_version", 1)
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        problem = StateError(
            f"expected a schema version (an integer >= 1), got {describe(version)}"
        )
        raise fields_error(dict, [("schema_version", problem)])
    return version


def migrate(data: Any, *, accept_newer: bool = False) -> dict[str, Any]:
    """``data`` brought to SCHEMA_VERSION by the registered steps, one version at a time.

    A version newer than SCHEMA_VERSION is an error, unless ``accept_newer``: then the data is
    returned as if it were current, for a lenient reader that drops what it does not know.
    """
    version = version_of(data)
    if version > SCHEMA_VERSION:
        if accept_newer:
            return {**data, "schema_version": SCHEMA_VERSION}
        problem = StateError(
            f"schema {version} is newer than this accmt-state reads ({SCHEMA_VERSION}); "
            "upgrade accmt-state, or load with lenient=True to keep the fields it knows"
        )
        raise fields_error(dict, [("schema_version", problem)])
    for step in range(version, SCHEMA_VERSION):
        data = {**_MIGRATIONS[step](dict(data)), "schema_version": step + 1}
    return dict(data)


# Some accmt 1.x releases wrote these at the top level and others (1.9.5.1 among them) did not;
# a file without them keeps the defaults, except best_valid_loss, read from where those
# releases kept it (see _best_valid_loss). The other fields remain required.
_LATE_1X_DEFAULTS: dict[str, Any] = {
    "model_savings": {},
    "best_valid_loss": float("inf"),
    "train_dataloader_idx": 0,
}


@register_migration(1)
def _from_accmt_1(data: dict[str, Any]) -> dict[str, Any]:
    """accmt 1.x's state.json to schema 2.

    - ``patience_left``: 1.x wrote -1 for a saving rule without patience; schema 2 has no entry.
    - ``batches_seen_in_epoch``: 1.x resumed by skipping ``train_step`` batches, so it is that.
    - ``samples_seen_in_epoch``: 1.x did not record it (it needs the batch size); 0.
    - ``sampler_seed``: 1.x did not use a seedable sampler; None.
    - ``best_valid_loss``: when the file has none at the top level, the mean over validation
      sets of the ``best_valid_loss`` each set kept in ``additional_metrics`` (1.9.5.1 wrote
      ``additional_metrics["0"]["best_valid_loss"]``); 1.x compared against that same mean.
    """
    migrated = {
        **_LATE_1X_DEFAULTS,
        **_best_valid_loss(data),
        **data,
        "samples_seen_in_epoch": 0,
        "batches_seen_in_epoch": data.get("train_step", 0),
        "sampler_seed": None,
    }
    patience = data.get("patience_left")
    if isinstance(patience, dict):
        migrated["patience_left"] = {rule: left for rule, left in patience.items() if left != -1}
    return migrated


def _best_valid_loss(data: dict[str, Any]) -> dict[str, float]:
    """``{"best_valid_loss": ...}`` from the per-set values of a 1.x file, or ``{}``."""
    sets = data.get("additional_metrics")
    per_set = (
        [metrics.get("best_valid_loss") for metrics in sets.values()]
        if isinstance(sets, dict) and all(isinstance(metrics, dict) for metrics in sets.values())
        else []
    )
    values = [v for v in per_set if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return {"best_valid_loss": sum(values) / len(values)} if values else {}


@register_migration(2)
def _drop_unread_fields(data: dict[str, Any]) -> dict[str, Any]:
    """Schema 2 to 3: the position in the epoch is ``batches_seen_in_epoch`` alone; the data
    order is Accelerate's seedable sampler's, a function of (seed, epoch), so neither the samples
    count nor the sampler's seed was ever read.

    - ``last_evaluation_step``: unknown for a run of schema 2; None (the next evaluation runs).
    - ``skipped_steps``: schema 2 never skipped a step; 0.
    - ``train_dataloader_idx``: schema 3 dropped it, and schema 4 reads it again with the
      meaning it had, so this step leaves it for the next one (see ``_stage_index``).
    """
    for name in ("samples_seen_in_epoch", "sampler_seed"):
        data.pop(name, None)
    return {**data, "last_evaluation_step": None, "skipped_steps": 0}


@register_migration(3)
def _stage_index(data: dict[str, Any]) -> dict[str, Any]:
    """Schema 3 to 4: ``train_dataloader_idx``, the index of the curriculum stage, is back.

    A schema 3 file never had it: 0 (the first stage; a Trainer resuming such a run sets it
    from the epoch before training). A file of schema 2 or of accmt 1.x keeps the value it had:
    the field meant the same there (the index of the training loader in use), and is checked
    as a count on load like every other.
    """
    return {**data, "train_dataloader_idx": data.get("train_dataloader_idx", 0)}


@register_migration(4)
def _stop_fields(data: dict[str, Any]) -> dict[str, Any]:
    """Schema 4 to 5: ``stop_reason`` and ``stop_signal`` say what stopped a run before its
    end. A schema 4 file does not say: None for both (a resumed run clears them anyway)."""
    return {**data, "stop_reason": None, "stop_signal": None}
