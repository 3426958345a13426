"""Rows of different lengths held end to end in one tensor, padded with tensor operations."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import torch

from ._errors import CollatorError
from ._tokenizer import PaddingSide


class Ragged:
    """A batch of rows (token ids, labels, offsets) stored as one tensor of all their items.

    ``values[starts[i]:starts[i] + lengths[i]]`` is row ``i``. Padding places all values at
    once through a boolean mask of the real positions, never row by row in Python.
    """

    def __init__(self, values: torch.Tensor, lengths: list[int]) -> None:
        self.values = values
        self.lengths = lengths

    @classmethod
    def from_rows(cls, rows: Sequence[Any], what: str) -> Ragged:
        """Rows given as lists of ints, numpy arrays or tensors; ``what`` names them in errors."""
        try:
            if all(isinstance(row, (list, tuple)) for row in rows):
                return cls._from_lists(rows)
            tensors = [torch.as_tensor(row) for row in rows]
            lengths = [len(tensor) for tensor in tensors]
            return cls(torch.cat(tensors).to(torch.int64), lengths)
        except (TypeError, ValueError, RuntimeError) as error:
            raise CollatorError(f"{what}: cannot be read as rows of integers ({error})") from error

    @classmethod
    def _from_lists(cls, rows: Sequence[Sequence[Any]]) -> Ragged:
        lengths = [len(row) for row in rows]
        values = torch.tensor(list(itertools.chain.from_iterable(rows)), dtype=torch.int64)
        if values.numel() == 0 and values.dim() == 1:
            # Every row empty: nothing says what an item's shape is; a token is a scalar.
            values = values.reshape(0)
        return cls(values, lengths)

    @property
    def longest(self) -> int:
        return max(self.lengths, default=0)

    def rows_and_positions(self) -> tuple[torch.Tensor, torch.Tensor]:
        """For each item: the row it belongs to, and its place in that row (both flat)."""
        lengths = torch.tensor(self.lengths)
        rows = torch.repeat_interleave(torch.arange(len(self.lengths)), lengths)
        starts = torch.repeat_interleave(lengths.cumsum(0) - lengths, lengths)
        return rows, torch.arange(len(rows)) - starts

    def real_positions(self, length: int, side: PaddingSide) -> torch.Tensor:
        """(rows, length) bool: True where a row's own items sit once padded to ``length``."""
        lengths = torch.tensor(self.lengths)
        positions = torch.arange(length)
        if side == "right":
            return positions < lengths[:, None]
        return positions >= (length - lengths)[:, None]

    def padded(self, real: torch.Tensor, value: int) -> torch.Tensor:
        """(rows, length, ...) with ``value`` wherever ``real`` (from real_positions) is False."""
        out = self.values.new_full((*real.shape, *self.values.shape[1:]), value)
        out[real] = self.values
        return out

    def same_lengths_as(self, other: Ragged) -> bool:
        return self.lengths == other.lengths
