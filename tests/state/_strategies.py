"""Hypothesis strategies for valid training states and for arbitrary JSON."""

from __future__ import annotations

from typing import Any

import attrs
from hypothesis import strategies as st

from accmt_state import TrainingState

counts = st.integers(min_value=0)
keys = st.text(max_size=12)

json_scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
    max_leaves=12,
)

FIELD_STRATEGIES: dict[str, st.SearchStrategy[Any]] = {
    "batch_iteration": counts,
    "global_step": counts,
    "train_step": counts,
    "val_step": counts,
    "epoch": counts,
    "is_end_of_epoch": st.booleans(),
    "is_last_training_batch": st.booleans(),
    "is_last_validation_batch": st.booleans(),
    "is_last_epoch": st.booleans(),
    "evaluations_done": counts,
    "additional_metrics": st.dictionaries(
        keys, st.dictionaries(keys, json_values, max_size=4), max_size=3
    ),
    "model_savings": st.dictionaries(keys, st.floats(), max_size=4),
    "patience_left": st.dictionaries(keys, counts, max_size=4),
    "best_train_loss": st.floats(),
    "best_valid_loss": st.floats(),
    "finished": st.booleans(),
    "num_checkpoints_made": counts,
    "batches_seen_in_epoch": counts,
    "last_evaluation_step": st.none() | counts,
    "skipped_steps": counts,
    "train_dataloader_idx": counts,
    "stop_reason": st.none() | st.text(max_size=20),
    "stop_signal": st.none() | st.sampled_from(["SIGTERM", "SIGINT", "SIGUSR1"]),
    "schema_version": st.just(5),
}
assert set(FIELD_STRATEGIES) == set(attrs.fields_dict(TrainingState)), "a field lacks a strategy"

states = st.builds(TrainingState, **FIELD_STRATEGIES)
