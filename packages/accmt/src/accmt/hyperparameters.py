"""accmt 1.x's ``accmt.hyperparameters``: HyperParameters that take 1.x's constructor
(accmt-trainer's, through ``accmt._one_x``)."""

from accmt_trainer import HyperParametersError, Optimizer, Scheduler

from ._one_x import HyperParameters

__all__ = ["HyperParameters", "HyperParametersError", "Optimizer", "Scheduler"]
