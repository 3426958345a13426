"""The two layouts a configuration file (or dict) may have: flat field names, or the ``hps:``
block with ``optimizer: {type: ...}`` that ``HyperParameters.to_yaml`` writes.

The older keys ``optim`` and ``optim_kwargs`` are read too: accmt 1.x wrote its files with them,
and a file on disk is read where its format lives."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .._errors import HyperParametersError
from ._arguments import join, unknown_error


def where_given(error: HyperParametersError, where: Mapping[str, str]) -> HyperParametersError:
    """``error`` with its key as the user wrote it (``where`` maps each field to that key)."""
    head = re.match(r"[A-Za-z_]*", error.key)
    name = head.group() if head else ""
    if name not in where:
        return error
    return HyperParametersError(where[name] + error.key[len(name) :], error.problem)


def layout_arguments(data: Any, fields: list[str]) -> tuple[dict[str, Any], dict[str, str]]:
    """The constructor arguments in ``data`` (flat or ``hps:`` layout), and where each came
    from."""
    if not isinstance(data, Mapping):
        raise HyperParametersError(
            "hyperparameters", f"expected a mapping, got {type(data).__name__}"
        )
    prefix = ""
    if "hps" in data:
        others = [key for key in data if key != "hps"]
        if others:
            listed = ", ".join(map(repr, others))
            raise HyperParametersError(
                str(others[0]) if len(others) == 1 else "hyperparameters",
                f"unknown top-level {listed} next to 'hps' (hyperparameters go under hps:)",
            )
        data = {} if data["hps"] is None else data["hps"]
        prefix = "hps"
        if not isinstance(data, Mapping):
            raise HyperParametersError("hps", f"expected a mapping, got {type(data).__name__}")
    arguments: dict[str, Any] = {}
    where: dict[str, str] = {}

    def put(field: str, value: Any, key: str) -> None:
        if field in arguments:
            raise HyperParametersError(
                join(prefix, key), f"the {field} is given twice: here and as {where[field]!r}"
            )
        arguments[field] = value
        where[field] = join(prefix, key)

    unknown = []
    for key, value in data.items():
        if key in ("optimizer", "optim", "scheduler") and isinstance(value, Mapping):
            field = "scheduler" if key == "scheduler" else "optimizer"
            block = dict(value)
            if "type" not in block:
                raise HyperParametersError(
                    join(prefix, f"{key}.type"), f"missing: the {field}'s name or class"
                )
            put(field, block.pop("type"), f"{key}.type")
            put(f"{field}_kwargs", block, key)
        elif key == "optim":
            put("optimizer", value, key)
        elif key == "optim_kwargs":
            put("optimizer_kwargs", value, key)
        elif key in fields:
            put(key, value, key)
        else:
            unknown.append(key)
    if unknown:
        raise unknown_error(prefix, unknown, fields, "HyperParameters", "key")
    return arguments, where
