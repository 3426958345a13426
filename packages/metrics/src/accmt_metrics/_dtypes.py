"""Names for the kinds of dtype the metrics accept."""

from __future__ import annotations

import torch


def is_integer(dtype: torch.dtype) -> bool:
    """Integer or bool: what class labels may be."""
    return not dtype.is_floating_point and not dtype.is_complex


def is_real(dtype: torch.dtype) -> bool:
    """Integer or floating point, not bool nor complex: what measured values may be."""
    return dtype != torch.bool and not dtype.is_complex
