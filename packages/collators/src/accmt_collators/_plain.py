"""Collating the values that are not padded: torch's ``default_collate``, with named errors."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch.utils.data import default_collate

from ._errors import CollatorError

KeyPath = tuple[Any, ...]
"""Where a value sits inside a sample: the keys and indices leading to it."""


def place(path: KeyPath) -> str:
    """``('source', 0)`` as ``['source'][0]``, the way one would index a sample."""
    return "".join(f"[{key!r}]" for key in path)


def _uneven(owner: str, path: KeyPath, error: Exception) -> CollatorError:
    return CollatorError(
        f"{owner}: samples[*]{place(path)} cannot be collated ({error}). A field that is not "
        "tokenized must have the same shape in every sample: make it so when preparing the "
        "data, or put it in a mapping with 'input_ids' to have it padded"
    )


def collate_plain(values: Sequence[Any], owner: str, path: KeyPath) -> Any:
    """``default_collate`` of one field across the samples."""
    try:
        return default_collate(list(values))
    except (RuntimeError, TypeError, ValueError) as error:
        raise _uneven(owner, path, error) from error


def collate_beside_tokens(
    values: Sequence[Any], owner: str, path: KeyPath, *, float64: bool = False
) -> Any:
    """A field that sits next to ``input_ids`` and is not padded (a class label, a score).

    Python numbers and lists become a tensor the way transformers' ``tokenizer.pad`` makes
    them (``torch.tensor``: ints to int64, floats to float32, or with ``float64`` to float64
    as numpy makes them for its "np" batches); anything else goes through
    ``default_collate`` (tensors keep their dtype, strings stay a list).
    """
    if isinstance(values[0], (bool, int, float, list, tuple)):
        try:
            tensor = torch.tensor(values)
            if float64 and tensor.is_floating_point():
                # Again from the values: float32 has already rounded them.
                tensor = torch.tensor(values, dtype=torch.float64)
            return tensor
        except (RuntimeError, TypeError, ValueError) as error:
            raise _uneven(owner, path, error) from error
    return collate_plain(values, owner, path)
