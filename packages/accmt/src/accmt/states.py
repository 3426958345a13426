"""accmt 1.x's ``accmt.states``: the TrainingState (now from accmt-state)."""

from accmt_state import SCHEMA_VERSION, StateError, TrainingState, register_migration

__all__ = ["SCHEMA_VERSION", "StateError", "TrainingState", "register_migration"]
