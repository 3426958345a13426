"""accmt 1.x's ``accmt.states``: the TrainingState (now from accmt-state)."""

from accmt_state import *  # noqa: F403
from accmt_state import __all__ as __all__
