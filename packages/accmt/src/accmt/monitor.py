"""accmt 1.x's ``accmt.monitor``: a Monitor that takes 1.x's flags (accmt-trainer's, through
``accmt._one_x``)."""

from ._one_x import Monitor

__all__ = ["Monitor"]
