"""accmt: a PyTorch training framework on HuggingFace Accelerate.

This meta-package re-exports its parts (accmt-decorators, accmt-state, accmt-callbacks,
accmt-metrics, accmt-trainer, accmt-collators, accmt-search), so that ``from accmt import
Trainer`` and accmt 1.x's import paths keep working. The names accmt 1.x spelled otherwise
(``Trainer``, ``HyperParameters``, ``Monitor``, ``AcceleratorModule``,
``ExtendedAcceleratorModule``, ``HyperParameterSearch``, ``RatioCurriculum``) and 1.x's
``Evaluator`` are those of ``accmt._one_x``, which take 1.x's calls and hand 2.x ones to the
parts. Importing it builds nothing: no Accelerator, no process group.
"""

import accmt_callbacks as _callbacks
import accmt_collators as _collators
import accmt_decorators as _decorators
import accmt_metrics as _metrics
import accmt_search as _search
import accmt_state as _state
import accmt_trainer as _trainer

# Every public name of every part, so that a name a part adds is here without an edit.
from accmt_callbacks import *  # noqa: F403
from accmt_collators import *  # noqa: F403
from accmt_decorators import *  # noqa: F403
from accmt_metrics import *  # noqa: F403
from accmt_search import *  # noqa: F403
from accmt_state import *  # noqa: F403
from accmt_trainer import *  # noqa: F403

# After the parts: the classes that also take accmt 1.x's calls win for their names.
from ._one_x import AcceleratorModule as AcceleratorModule
from ._one_x import Evaluator as Evaluator
from ._one_x import ExtendedAcceleratorModule as ExtendedAcceleratorModule
from ._one_x import HyperParameters as HyperParameters
from ._one_x import HyperParameterSearch as HyperParameterSearch
from ._one_x import Monitor as Monitor
from ._one_x import RatioCurriculum as RatioCurriculum
from ._one_x import Trainer as Trainer
from ._one_x._dropped import TOP_LEVEL as _TOP_LEVEL
from ._one_x._dropped import dropped as _dropped

# accmt 1.x's `from accmt import set_seed` (also in accmt.utils, with get_seed).
from ._one_x._utils import set_seed as set_seed

__version__ = "2.0.0"

# accmt 1.x's module-level accelerator, allow_tf32, ...: using one says what to use instead.
__getattr__ = _dropped("accmt", _TOP_LEVEL)

__all__ = ["Evaluator", "__version__"]
__all__ += _decorators.__all__
__all__ += _state.__all__
__all__ += _callbacks.__all__
__all__ += _metrics.__all__
__all__ += _trainer.__all__
__all__ += _collators.__all__
__all__ += _search.__all__
__all__ += ["set_seed"]
