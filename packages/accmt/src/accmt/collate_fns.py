"""accmt 1.x's ``accmt.collate_fns`` (now from accmt-collators, on torch alone)."""

from accmt_collators import *  # noqa: F403
from accmt_collators import __all__ as __all__
