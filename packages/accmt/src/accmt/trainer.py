"""accmt 1.x's ``accmt.trainer``: the Trainer that takes 1.x's calls (accmt-trainer's, through
the translation in ``accmt._one_x``)."""

from accmt_trainer import CheckpointError, TrainerConfigError

from ._one_x import Trainer

__all__ = ["CheckpointError", "Trainer", "TrainerConfigError"]
