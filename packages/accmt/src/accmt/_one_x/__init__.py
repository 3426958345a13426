"""accmt 1.x, translated: every 1.x spelling that accmt still takes, in one place.

The packages below accept accmt 2's spelling only. The classes here take 1.x's calls, give
the same DeprecationWarnings as they name the 2.x spelling, and hand 2.x objects and options
to the packages: one concept per module (Trainer options, HyperParameters, Monitor, the
module's helpers, curriculum stages, 1.x's RatioCurriculum, metrics, the Evaluator,
``accmt.utils``, the hyperparameter search and its ``set_parameters`` space, and the names 2.x
dropped).
"""

from ._curriculum import RatioCurriculum
from ._evaluator import Evaluator
from ._hyperparameters import HyperParameters
from ._module import AcceleratorModule, ExtendedAcceleratorModule
from ._monitor import Monitor
from ._search import HyperParameterSearch
from ._trainer import Trainer

__all__ = [
    "AcceleratorModule",
    "Evaluator",
    "ExtendedAcceleratorModule",
    "HyperParameterSearch",
    "HyperParameters",
    "Monitor",
    "RatioCurriculum",
    "Trainer",
]
