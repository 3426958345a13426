"""Every error accmt-state raises, and the cattrs-shaped errors that feed them.

StateError, a ValueError, is the base; each subclass is also the built-in that fits, so that
``except StateError`` and ``except TypeError`` (say) both work."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from cattrs import transform_error
from cattrs.errors import AttributeValidationNote, ClassValidationError, ForbiddenExtraKeysError
from cattrs.v import format_exception


class StateError(ValueError):
    """The base class of every error accmt-state raises; raised itself for a file or mapping that
    is not a valid training state, a JSON file that cannot be read, or a field given a value out
    of its range (``state.global_step = -1``).

    ``file`` is the path that was read (None for data handed over in memory). ``problems`` has one
    line per bad field, each ending in its JSON path, such as ``must be >= 0, got -3 @
    $.global_step`` or ``required field missing @ $.epoch``. The message holds both.
    """

    def __init__(
        self,
        summary: str,
        problems: Sequence[str] = (),
        file: str | os.PathLike[str] | None = None,
    ) -> None:
        self.summary = summary
        self.problems = tuple(problems)
        self.file = None if file is None else os.fspath(file)
        where = "" if self.file is None else f"{self.file}: "
        super().__init__(where + summary + "".join(f"\n  {line}" for line in self.problems))

    def __reduce__(self) -> tuple[Any, ...]:
        # Errors cross process boundaries (multiprocessing, distributed launchers) by pickle.
        return (type(self), (self.summary, self.problems, self.file))

    @classmethod
    def from_exception(
        cls, exc: BaseException, summary: str, file: str | os.PathLike[str] | None = None
    ) -> StateError:
        """Describe ``exc`` (usually a cattrs validation error) field by field, with JSON paths."""
        return cls(summary, transform_error(exc, format_exception=_describe), file)


class StateTypeError(StateError, TypeError):
    """A value of the wrong type: for a field of a TrainingState (``state.finished = 1``), for
    the converter (a string where a number belongs), or for an argument (an unknown field given to
    ``TrainingState.update``, a non-int ``register_migration`` version). Also a StateError, and
    so a ValueError too."""


class StateMigrationError(StateError):
    """``register_migration`` was misused: a version with no next one, or one already
    registered. A StateError, so a ValueError."""


def fields_error(
    cl: type, named: Sequence[tuple[str, Exception]], others: Sequence[Exception] = ()
) -> ClassValidationError:
    """A cattrs error for the named fields of ``cl``, shaped as cattrs' own, so that
    ``cattrs.transform_error`` reports each at ``$.<name>`` (also when ``cl`` is nested)."""
    for name, exc in named:
        note = AttributeValidationNote(f"Structuring field {name!r}", name, Any)
        setattr(exc, "__notes__", [*getattr(exc, "__notes__", []), note])  # noqa: B010
    exceptions = [*others, *(exc for _, exc in named)]
    return ClassValidationError(f"While structuring {cl.__name__}", exceptions, cl)


def _describe(exc: BaseException, type_: type | None) -> str:
    if isinstance(exc, ForbiddenExtraKeysError):
        names = ", ".join(map(repr, sorted(exc.extra_fields)))
        return f"unknown fields {names} (load with lenient=True to ignore them)"
    # The package's hooks and validators raise one-line messages that say what was expected
    # and what came; cattrs' generic wording ("invalid value for type") would hide that.
    if isinstance(exc, (TypeError, ValueError)) and len(exc.args) == 1:
        return str(exc.args[0])
    return format_exception(exc, type_)
