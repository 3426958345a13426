"""accmt 1.x's ``accmt.trainer`` (now from accmt-trainer)."""

from accmt_trainer import CheckpointError, Trainer, TrainerConfigError

__all__ = ["CheckpointError", "Trainer", "TrainerConfigError"]
