"""The small helpers accmt 1.x's ``accmt.utils`` offered, kept for 1.x programs."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar
from urllib.parse import urlparse

import torch
from accelerate.utils import set_seed as _accelerate_set_seed
from accelerate.utils.memory import clear_device_cache

__all__ = [
    "clear_device_cache",
    "combine_dicts",
    "divide_into_batches",
    "divide_list",
    "drop_duplicates",
    "filter_kwargs",
    "get_array_partition",
    "get_number_and_unit",
    "get_seed",
    "is_url",
    "iterbatch",
    "pad",
    "set_seed",
]

T = TypeVar("T")

_seed: int | None = None

# accmt 1.x's units for "2ep", "500 steps", "eval", ...
_UNITS = {
    "epoch": ("epoch", "ep", "epochs", "eps"),
    "step": ("step", "st", "steps", "sts"),
    "eval": ("evaluation", "eval", "evaluations", "evals"),
}


def set_seed(seed: int) -> None:
    """Seed Python's ``random``, numpy and torch (Accelerate's ``set_seed``), and remember the
    seed for :func:`get_seed`. ``Trainer(seed=...)`` also seeds the data order."""
    global _seed
    _accelerate_set_seed(seed)
    _seed = seed


def get_seed(default: int | None = None) -> int | None:
    """The seed given to :func:`set_seed`, or ``default`` if it was not called."""
    return _seed if _seed is not None else default


def combine_dicts(*dicts: dict[Any, Any]) -> dict[Any, Any]:
    """One dict with the items of all, later ones winning."""
    combined: dict[Any, Any] = {}
    for mapping in dicts:
        combined.update(mapping)
    return combined


def divide_list(items: Sequence[T], parts: int) -> list[Sequence[T]]:
    """``items`` cut into ``parts`` consecutive pieces whose lengths differ by at most one."""
    size, extra = divmod(len(items), parts)
    return [
        items[i * size + min(i, extra) : (i + 1) * size + min(i + 1, extra)] for i in range(parts)
    ]


def divide_into_batches(items: Sequence[T], batch_size: int) -> list[Sequence[T]]:
    """``items`` cut into consecutive batches of ``batch_size`` (the last may be shorter)."""
    return list(iterbatch(items, batch_size))


def iterbatch(items: Sequence[T], batch_size: int) -> Iterator[Sequence[T]]:
    """The batches of :func:`divide_into_batches`, one at a time."""
    for start in range(0, len(items), batch_size):
        yield items[start : start + batch_size]


def get_array_partition(array: Sequence[T], n_partitions: int, get: int) -> Sequence[T]:
    """Piece ``get`` of ``array`` cut as :func:`divide_list` cuts it (a view for tensors)."""
    size, extra = divmod(len(array), n_partitions)
    start = get * size + min(get, extra)
    return array[start : start + size + (1 if get < extra else 0)]


def drop_duplicates(tensor: torch.Tensor, padded_mask: torch.Tensor | None = None) -> torch.Tensor:
    """The rows of ``tensor`` where ``padded_mask`` is true (all of them without a mask)."""
    return tensor if padded_mask is None else tensor[padded_mask.bool()]


def pad(tensor: torch.Tensor, to: int, value: float) -> torch.Tensor:
    """``tensor`` padded on the right of its last dimension to length ``to`` with ``value``
    (unchanged when it is that long already)."""
    missing = to - tensor.shape[-1]
    return tensor if missing <= 0 else torch.nn.functional.pad(tensor, (0, missing), value=value)


def filter_kwargs(kwargs: dict[str, Any], fn: Callable[..., Any]) -> dict[str, Any]:
    """The items of ``kwargs`` that ``fn`` (a function or a class) takes by name."""
    names = {
        name
        for name, parameter in inspect.signature(fn).parameters.items()
        if parameter.kind not in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD)
    }
    return {key: value for key, value in kwargs.items() if key in names}


def is_url(string: str) -> bool:
    """Whether ``string`` is an http(s) or ftp(s) address, or the local machine."""
    if string in ("localhost", "127.0.0.1"):
        return True
    parsed = urlparse(string)
    return parsed.scheme in ("http", "https", "ftp", "ftps") and bool(parsed.hostname)


def get_number_and_unit(string: str) -> tuple[int, str | None]:
    """``"2ep"`` -> ``(2, "epoch")``, ``"steps"`` -> ``(1, "step")``, ``"1000"`` ->
    ``(1000, None)``; an unknown unit comes back as written (``"10GB"`` -> ``(10, "GB")``)."""
    match = re.fullmatch(r"(\d+)\s*(\D*)", string.strip())
    number, text = (int(match.group(1)), match.group(2).strip()) if match else (1, string.strip())
    if not text:
        return number, None
    unit = next((key for key, spellings in _UNITS.items() if text.lower() in spellings), None)
    return number, unit or text
