"""A running, optionally weighted, mean: of a loss, or of any value per sample."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from ._base import take
from ._dtypes import is_real
from ._summed import Statistic, SummedMetric

Number = int | float


class Mean(SummedMetric):
    """The weighted mean of the values added: ``sum(value * weight) / sum(weight)``.

    Two ways to feed it, the same underneath:

    - ``mean.update(loss, weight=batch_size)``: one value (a Python number or a 0-d tensor, such
      as a batch's mean loss) with its weight (default 1). Weighting each batch's mean loss by
      its batch size gives the mean loss per sample.
    - ``mean.add_batch(values, weight=None, mask=None)``: a 1-D tensor with one value per sample
      (each of weight 1, or of the per-sample ``weight`` tensor, or all of one number), or a
      scalar as in ``update``. A scalar counts as a batch of one entry, so ``mask`` and
      ``num_samples`` are meaningful only with per-sample values.

    There are no references: ``add_batch(values, references)`` with references raises.
    Tensors may be on any device and are detached; nothing here waits for the device. Keeps
    three numbers: the float64 sum of ``value * weight``, the sum of the weights (an exact int
    while every weight is an int) and the count of negative weights. A negative weight, or a
    total weight of zero, raises at ``compute()``.

    ``compute()`` returns ``{name: mean}``; the name defaults to ``"mean"`` (pass
    ``name="loss"`` for a loss), and ``greater_is_better`` defaults to False.
    """

    default_name = "mean"
    default_greater_is_better = False

    def update(self, value: Tensor | float, weight: Tensor | float = 1) -> None:
        """Add one value (or one value per sample) with its weight."""
        self.add_batch(value, weight=weight)

    def add_batch(
        self,
        predictions: Tensor | float,
        references: Any = None,
        *,
        mask: Tensor | None = None,
        weight: Tensor | float | None = None,
    ) -> None:
        """Add values: a scalar, or a 1-D tensor of one value per sample (see the class)."""
        if references is not None:
            raise self.error("a Mean takes values and no references; give weights with weight=")
        values = self._values(predictions, "values")
        rows = values.shape[0] if isinstance(values, Tensor) and values.ndim else 1
        weights = 1 if weight is None else self._weights(weight, rows)
        selection, placed = self._select(rows, mask)
        if selection is not None:
            values = take(_column(values, rows), selection)
            if isinstance(weights, Tensor):
                weights = take(_column(weights, rows), selection)
            rows = values.shape[0]
            self._masked += placed - rows
        if rows:
            self._accumulate(self._sums(values, weights, rows))

    def statistics(self, predictions: Tensor, references: Tensor) -> Sequence[Statistic]:
        """The sums of a batch of ``predictions`` (values) weighted by ``references``."""
        weights = references.double()
        return (predictions.double() * weights).sum(), weights.sum(), (weights < 0).sum()

    def result(self, *totals: Tensor) -> float:
        weighted, weight, negative = totals
        if int(negative):
            raise self.error(f"a weight is negative ({int(negative)} of them)")
        if float(weight) == 0:
            raise self.error("the weights add up to zero")
        return float(weighted) / float(weight)

    def _sums(self, values: Tensor | float, weights: Tensor | Number, rows: int) -> list[Statistic]:
        if isinstance(weights, Tensor):
            if not isinstance(values, Tensor):
                values = torch.tensor(values, dtype=torch.float64, device=weights.device)
            return list(self.statistics(values, weights.expand(values.shape)))
        negative = rows if weights < 0 else 0
        if isinstance(values, Tensor):
            total = values.sum(dtype=torch.float64)
            return [total if weights == 1 else total * weights, weights * rows, negative]
        return [float(values) * weights, weights, negative]

    def _values(self, value: Tensor | float, what: str) -> Tensor | float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if not isinstance(value, Tensor):
            raise self.error(f"{what} must be a number or a tensor, got {type(value).__name__}")
        if not is_real(value.dtype):
            raise self.error(f"{what} must be real numbers, got {value.dtype}")
        if value.ndim > 1:
            raise self.error(
                f"{what} must be a scalar or one value per sample (1-D), got shape "
                f"{tuple(value.shape)}"
            )
        return value.detach() if value.requires_grad else value

    def _weights(self, weight: Tensor | float, rows: int) -> Tensor | Number:
        if isinstance(weight, (int, float)) and not isinstance(weight, bool):
            return weight
        weights = self._values(weight, "weight")
        assert isinstance(weights, Tensor)
        if weights.ndim and weights.shape[0] != rows:
            raise self.error(f"weight has {weights.shape[0]} entries but there are {rows} values")
        return weights


def _column(value: Tensor | float, rows: int) -> Tensor:
    """``value`` as one entry per row, for selecting rows."""
    if isinstance(value, Tensor):
        return value.reshape(-1).expand(rows)
    return torch.full((rows,), value, dtype=torch.float64)
