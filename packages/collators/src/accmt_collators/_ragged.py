"""Rows of different lengths, padded into one tensor for the whole batch."""

from __future__ import annotations

import array
import functools
import itertools
from collections.abc import Sequence
from typing import Any

import torch

from ._errors import CollatorError
from ._plain import KeyPath, place
from ._tokenizer import PaddingSide

_UNREADABLE = (TypeError, ValueError, RuntimeError, OverflowError)


class Ragged:
    """A batch of rows (token ids, labels, offsets): their lengths, read at once, and their
    values, converted only when padded, straight into the padded layout."""

    def __init__(self, rows: Sequence[Any], lengths: list[int], owner: str, path: KeyPath) -> None:
        self.rows = rows
        self.lengths = lengths
        self.owner = owner
        self.path = path

    @classmethod
    def from_rows(cls, rows: Sequence[Any], owner: str, path: KeyPath) -> Ragged:
        """Rows given as lists of ints, numpy arrays or tensors: ``samples[*]{path}`` of the
        collator ``owner`` (which errors name)."""
        try:
            lengths = [len(row) for row in rows]
        except _UNREADABLE as error:
            raise _unreadable(owner, path, error) from error
        return cls(rows, lengths, owner, path)

    @property
    def longest(self) -> int:
        return max(self.lengths, default=0)

    @functools.cached_property
    def length_tensor(self) -> torch.Tensor:
        """The rows' lengths as int64 (read in C through an array: a fifth of torch.tensor's
        cost on a list, which counts at small batches)."""
        if not self.lengths:
            return torch.zeros(0, dtype=torch.int64)
        return torch.frombuffer(array.array("q", self.lengths), dtype=torch.int64)

    def real_positions(self, length: int, side: PaddingSide) -> torch.Tensor:
        """(rows, length) bool: True where a row's own items sit once padded to ``length``."""
        lengths = self.length_tensor
        columns = torch.arange(length)
        if side == "right":
            return columns < lengths[:, None]
        return columns >= (length - lengths)[:, None]

    def places(self, length: int, side: PaddingSide) -> torch.Tensor:
        """Each padded column's place in its own row: (1, length) when padded on the right,
        (rows, length) on the left (negative over the padding)."""
        columns = torch.arange(length)[None, :]
        if side == "right":
            return columns
        return columns - (length - self.length_tensor)[:, None]

    def all_equal(self, value: int) -> bool:
        """Whether every item of every row equals ``value`` (rows of Python lists only)."""
        rows = self.rows
        if not isinstance(rows[0], (list, tuple)):
            return False
        # list.count compares in C: far cheaper than converting the items.
        return all(row.count(value) == len(row) for row in rows)

    def padded(
        self, length: int, side: PaddingSide, value: int, real: torch.Tensor | None = None
    ) -> torch.Tensor:
        """(rows, length, ...) int64 with ``value`` around each row's items, placed on ``side``.

        ``real`` (this batch's ``real_positions``) is only read for rows that are not lists;
        it is made here when not given (lists of ints never need it).
        """
        try:
            if isinstance(self.rows[0], (list, tuple)):
                try:
                    return self._padded_lists(length, side, value)
                except TypeError:  # floats, or items of uneven shapes: torch says what is wrong
                    pass
            if real is None:
                real = self.real_positions(length, side)
            return self._padded_tensors(real, value)
        except _UNREADABLE as error:
            raise _unreadable(self.owner, self.path, error) from error

    def _padded_lists(self, length: int, side: PaddingSide, value: int) -> torch.Tensor:
        """Python ints to int64 in C, all rows at once (array reads a list in C, an iterator
        item by item); unless every row is full, each row is then copied to its place in a
        pre-filled buffer. torch shares the buffer without a copy: no per-item work in Python,
        no scatter after."""
        first = next((row[0] for row in self.rows if len(row)), None)
        # Items may be pairs themselves (offset_mapping): each row is then flattened.
        width = len(first) if isinstance(first, (list, tuple)) else 1
        flat = itertools.chain.from_iterable(self.rows)
        if width > 1:
            flat = itertools.chain.from_iterable(flat)
        values = array.array("q", list(flat))
        if len(values) != width * sum(self.lengths):
            raise ValueError(f"items are not all {width} long")
        stride = length * width
        shape = (len(self.rows), length, width) if width > 1 else (len(self.rows), length)
        if len(values) == stride * len(self.rows):  # every row is full: already in place
            items = values
        else:
            items = array.array("q", [value]) * (stride * len(self.rows))
            start = taken = 0
            for count in self.lengths:
                at = start if side == "right" else start + (length - count) * width
                items[at : at + count * width] = values[taken : taken + count * width]
                taken += count * width
                start += stride
        if not items:
            return torch.full(shape, value, dtype=torch.int64)
        return torch.frombuffer(items, dtype=torch.int64).view(shape)

    def _padded_tensors(self, real: torch.Tensor, value: int) -> torch.Tensor:
        """Rows of any other kind (tensors, arrays, lists of floats): concatenated, then placed
        through the mask of real positions."""
        tensors = [torch.as_tensor(row, dtype=torch.int64) for row in self.rows]
        values = torch.cat(tensors)
        out = values.new_full((*real.shape, *values.shape[1:]), value)
        out[real] = values
        return out

    def same_lengths_as(self, other: Ragged) -> bool:
        return self.lengths == other.lengths


def _unreadable(owner: str, path: KeyPath, error: Exception) -> CollatorError:
    return CollatorError(
        f"{owner}: samples[*]{place(path)} cannot be read as rows of integers ({error})"
    )
