"""The accmt TrainingState and its versioned, atomic JSON checkpoint serialisation.

Depends on attrs and cattrs only; never imports torch or numpy.
"""

from ._converter import converter
from ._errors import StateError, StateMigrationError, StateTypeError
from ._files import read_json, write_json
from ._migrations import SCHEMA_VERSION, register_migration
from ._state import TrainingState

__all__ = [
    "SCHEMA_VERSION",
    "StateError",
    "StateMigrationError",
    "StateTypeError",
    "TrainingState",
    "converter",
    "read_json",
    "register_migration",
    "write_json",
]
