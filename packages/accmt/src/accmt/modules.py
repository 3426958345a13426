"""accmt 1.x's ``accmt.modules``: accmt-trainer's modules with 1.x's helpers (``accmt._one_x``)."""

from ._one_x import AcceleratorModule, ExtendedAcceleratorModule

__all__ = ["AcceleratorModule", "ExtendedAcceleratorModule"]
