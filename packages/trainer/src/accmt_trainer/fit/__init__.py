"""One ``Trainer.fit`` from its options to its end: preparing the run, its owners (the optimizer
step, best models and patience, the non-finite guard), the training loop, the names checked
before the first step, and the lines it says."""

from ._best_models import BestModelOptions
from ._fit import Fit
from ._loop_options import LoopOptions
from ._nonfinite import NonFinitePolicy
from ._optimizer_step import StepOptions
from ._options import FitOptions
from ._setup import PreparedRun

__all__ = [
    "BestModelOptions",
    "Fit",
    "FitOptions",
    "LoopOptions",
    "NonFinitePolicy",
    "PreparedRun",
    "StepOptions",
]
