"""How a TrainingState becomes JSON data and back, through the package's converter.

The class only delegates here. Structuring a state migrates the data to the current schema,
requires every field (a file missing one is damaged, not old), and runs each field's
validators inside cattrs' per-field error handling, so every error names its field.
"""

from __future__ import annotations

import os
import warnings
from typing import Any, TypeVar

import attrs
from cattrs.errors import ClassValidationError
from cattrs.gen import make_dict_structure_fn, override

from ._converter import converter
from ._errors import StateError, fields_error
from ._files import read_json, write_json
from ._migrations import SCHEMA_VERSION, migrate, version_of

T = TypeVar("T")


def register(cls: type[Any]) -> None:
    """Teach the converter to structure ``cls``: migrate, require all fields, validate each."""
    attrs.resolve_types(cls)
    fields = attrs.fields(cls)
    overrides: dict[str, Any] = {a.name: override(struct_hook=_validated(a)) for a in fields}
    generated = make_dict_structure_fn(cls, converter, **overrides)
    names = [a.name for a in fields]

    def structure(data: Any, _: type[Any]) -> Any:
        data = migrate(data)
        missing = [(name, KeyError(name)) for name in names if name not in data]
        try:
            state = generated(data, cls)
        except ClassValidationError as exc:
            raise fields_error(cls, missing, exc.exceptions) from None
        if missing:
            raise fields_error(cls, missing)
        return state

    converter.register_structure_hook(cls, structure)


def _validated(attribute: attrs.Attribute[Any]) -> Any:
    def structure(value: Any, type_: Any) -> Any:
        result = converter.structure(value, type_)
        if attribute.validator is not None:
            attribute.validator(None, attribute, result)
        return result

    return structure


def state_to_dict(state: Any) -> dict[str, Any]:
    """The state as JSON-ready data."""
    data: dict[str, Any] = converter.unstructure(state)
    return data


def state_from_dict(
    cls: type[T],
    data: Any,
    *,
    lenient: bool,
    file: str | os.PathLike[str] | None = None,
    stacklevel: int = 3,
) -> T:
    """Structure ``data`` as ``cls``, raising StateError; lenient drops what is unknown."""
    try:
        ignored: list[str] = []
        if lenient:
            data, ignored = _known_part(cls, data)
        state = converter.structure(data, cls)
    except Exception as exc:  # anything structuring raises is a fault of the data
        raise StateError.from_exception(exc, f"not a valid {cls.__name__}", file) from exc
    if ignored:
        where = "" if file is None else f"{os.fspath(file)}: "
        warnings.warn(
            f"{where}loaded leniently, ignoring {'; '.join(ignored)}", stacklevel=stacklevel
        )
    return state


def save_state(state: Any, path: str | os.PathLike[str], *, durable: bool = True) -> None:
    """Write the state to ``path`` atomically."""
    write_json(path, state, durable=durable)


def load_state(cls: type[T], path: str | os.PathLike[str], *, lenient: bool) -> T:
    """Read the state in ``path``, raising StateError naming the file."""
    return state_from_dict(cls, read_json(path), lenient=lenient, file=path, stacklevel=4)


def _known_part(cls: type[Any], data: Any) -> tuple[dict[str, Any], list[str]]:
    """The part of ``data`` this version understands, and a description of the rest."""
    version = version_of(data)
    known = migrate(data, accept_newer=True)
    unknown = sorted(set(known) - set(attrs.fields_dict(cls)))
    ignored = []
    if version > SCHEMA_VERSION:
        ignored.append(f"schema_version {version} (newer than {SCHEMA_VERSION})")
    if unknown:
        ignored.append(f"unknown fields {', '.join(map(repr, unknown))}")
    return {key: value for key, value in known.items() if key not in unknown}, ignored
