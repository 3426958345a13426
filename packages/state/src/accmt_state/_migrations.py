"""Schema versions of the state file, and the registered steps that bring old ones forward.

Version 1 is accmt 1.x's ``state.json``: the TrainingState fields written by ``json.dump``
(bare ``Infinity`` included), with no ``schema_version`` key. Version 2 adds the fields exact
mid-epoch resume needs and the ``schema_version`` key itself. Version 3 drops the fields that
nothing read (``train_dataloader_idx``, ``samples_seen_in_epoch``, ``sampler_seed``) and adds
``last_evaluation_step`` and ``skipped_steps``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._converter import describe
from ._errors import StateError, StateMigrationError, StateTypeError, fields_error

SCHEMA_VERSION = 3
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


# accmt 1.x added these late in its life; its earlier state files lack them, and it loaded such a
# file by keeping its defaults, so the migration does too. The other fields remain required.
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
    """
    migrated = {
        **_LATE_1X_DEFAULTS,
        **data,
        "samples_seen_in_epoch": 0,
        "batches_seen_in_epoch": data.get("train_step", 0),
        "sampler_seed": None,
    }
    patience = data.get("patience_left")
    if isinstance(patience, dict):
        migrated["patience_left"] = {rule: left for rule, left in patience.items() if left != -1}
    return migrated


@register_migration(2)
def _drop_unread_fields(data: dict[str, Any]) -> dict[str, Any]:
    """Schema 2 to 3: the position in the epoch is ``batches_seen_in_epoch`` alone; the data
    order is Accelerate's seedable sampler's, a function of (seed, epoch), so neither the samples
    count nor the sampler's seed was ever read, and accmt 2 has one training loader.

    - ``last_evaluation_step``: unknown for a run of schema 2; None (the next evaluation runs).
    - ``skipped_steps``: schema 2 never skipped a step; 0.
    """
    for name in ("train_dataloader_idx", "samples_seen_in_epoch", "sampler_seed"):
        data.pop(name, None)
    return {**data, "last_evaluation_step": None, "skipped_steps": 0}
