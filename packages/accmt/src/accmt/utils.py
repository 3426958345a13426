"""accmt 1.x's ``accmt.utils``: ``set_seed`` and its small helpers. The rest of 1.x's module
(process constants, gather helpers, debug switches) is gone: importing one of those names says
what to use instead."""

from ._one_x._dropped import UTILS as _UTILS
from ._one_x._dropped import dropped as _dropped
from ._one_x._utils import *  # noqa: F403
from ._one_x._utils import __all__ as __all__

__getattr__ = _dropped("accmt.utils", _UTILS)
