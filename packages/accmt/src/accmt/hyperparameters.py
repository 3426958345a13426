"""accmt 1.x's ``accmt.hyperparameters`` (now from accmt-trainer)."""

from accmt_trainer import HyperParameters, HyperParametersError, Optimizer, Scheduler

__all__ = ["HyperParameters", "HyperParametersError", "Optimizer", "Scheduler"]
