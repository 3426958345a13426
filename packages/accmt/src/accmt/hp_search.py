"""accmt 1.x's ``accmt.hp_search`` (now from accmt-search: resumable, pruned, on N processes)."""

from accmt_search import *  # noqa: F403
from accmt_search import __all__ as __all__

# After the part: the class that also takes accmt 1.x's calls wins for its name.
from ._one_x import HyperParameterSearch as HyperParameterSearch
