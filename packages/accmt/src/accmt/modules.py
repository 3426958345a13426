"""accmt 1.x's ``accmt.modules`` (now from accmt-trainer)."""

from accmt_trainer import AcceleratorModule, ExtendedAcceleratorModule

__all__ = ["AcceleratorModule", "ExtendedAcceleratorModule"]
