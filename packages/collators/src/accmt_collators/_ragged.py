"""Rows of different lengths held end to end in one tensor, padded with tensor operations."""

from __future__ import annotations

import array
import itertools
from collections.abc import Sequence
from typing import Any

import torch

from ._errors import CollatorError
from ._plain import Path, place
from ._tokenizer import PaddingSide


class Ragged:
    """A batch of rows (token ids, labels, offsets) stored as one tensor of all their items.

    Padding places all values at once through a boolean mask of the real positions, never
    row by row in Python.
    """

    def __init__(self, values: torch.Tensor, lengths: list[int]) -> None:
        self.values = values
        self.lengths = lengths

    @classmethod
    def from_rows(cls, rows: Sequence[Any], owner: str, path: Path) -> Ragged:
        """Rows given as lists of ints, numpy arrays or tensors: ``samples[*]{path}`` of the
        collator ``owner`` (which errors name)."""
        try:
            if isinstance(rows[0], (list, tuple)):
                return cls._from_lists(rows)
            tensors = [torch.as_tensor(row) for row in rows]
            lengths = [len(tensor) for tensor in tensors]
            return cls(torch.cat(tensors).to(torch.int64), lengths)
        except (TypeError, ValueError, RuntimeError, OverflowError) as error:
            raise CollatorError(f"{owner}: samples[*]{place(path)} cannot be read as rows of "
                                f"integers ({error})") from error  # fmt: skip

    @classmethod
    def _from_lists(cls, rows: Sequence[Sequence[Any]]) -> Ragged:
        lengths = [len(row) for row in rows]
        first = next((row[0] for row in rows if len(row)), None)
        # Items may be pairs themselves (offset_mapping): each row is then flattened too.
        width = len(first) if isinstance(first, (list, tuple)) else 0
        try:
            # Python ints to int64 in C, row by row, then shared with torch without a copy
            # (a row of another kind, a tensor say, is iterated: slower, still right).
            items = array.array("q")
            for row in rows:
                items.extend(itertools.chain.from_iterable(row) if width else row)
        except TypeError:  # floats, or items of uneven shapes: torch says what is wrong
            flat = [item for row in rows for item in row]
            return cls(torch.tensor(flat, dtype=torch.int64), lengths)
        if not items:
            return cls(torch.zeros((0, width) if width else 0, dtype=torch.int64), lengths)
        values = torch.frombuffer(items, dtype=torch.int64)
        if width:
            if len(values) != width * sum(lengths):
                raise ValueError(f"items are not all {width} long")
            values = values.reshape(-1, width)
        return cls(values, lengths)

    @property
    def longest(self) -> int:
        return max(self.lengths, default=0)

    def real_positions(self, length: int, side: PaddingSide) -> torch.Tensor:
        """(rows, length) bool: True where a row's own items sit once padded to ``length``."""
        lengths = torch.tensor(self.lengths)
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
        return columns - (length - torch.tensor(self.lengths))[:, None]

    def padded(self, real: torch.Tensor, value: int) -> torch.Tensor:
        """(rows, length, ...) with ``value`` wherever ``real`` (from real_positions) is False."""
        out = self.values.new_full((*real.shape, *self.values.shape[1:]), value)
        out[real] = self.values
        return out

    def same_lengths_as(self, other: Ragged) -> bool:
        return self.lengths == other.lengths
