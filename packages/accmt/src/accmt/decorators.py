"""accmt 1.x's ``accmt.decorators`` (now from accmt-decorators, decided at call time)."""

from accmt_decorators import *  # noqa: F403
from accmt_decorators import __all__ as __all__
