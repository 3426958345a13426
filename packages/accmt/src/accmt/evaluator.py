"""accmt 1.x's ``accmt.evaluator``: its ``Evaluator``, on ``Trainer.evaluate``."""

from ._one_x import Evaluator

__all__ = ["Evaluator"]
