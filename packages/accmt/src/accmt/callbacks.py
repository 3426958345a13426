"""accmt 1.x's ``accmt.callbacks`` (now from accmt-callbacks)."""

from accmt_callbacks import *  # noqa: F403
from accmt_callbacks import __all__ as __all__
