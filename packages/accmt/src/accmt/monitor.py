"""accmt 1.x's ``accmt.monitor`` (now from accmt-trainer)."""

from accmt_trainer import Monitor

__all__ = ["Monitor"]
