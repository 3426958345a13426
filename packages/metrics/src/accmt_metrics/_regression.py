"""Mean squared and mean absolute error."""

from __future__ import annotations

import abc
from collections.abc import Sequence

from torch import Tensor

from ._dtypes import is_real
from ._summed import Statistic, SummedMetric


class _ElementwiseError(SummedMetric):
    """The mean over every element of every sample of an elementwise error.

    Keeps two numbers: the float64 sum of the errors and the exact count of elements. When
    every sample has the same shape this is scikit-learn's ``multioutput="uniform_average"``.
    """

    default_greater_is_better = False

    @abc.abstractmethod
    def _error(self, difference: Tensor) -> Tensor:
        """The error of each element, from ``predictions - references`` in float64."""

    def statistics(self, predictions: Tensor, references: Tensor) -> Sequence[Statistic]:
        if not is_real(predictions.dtype) or not is_real(references.dtype):
            raise self.error(
                "predictions and references must be real numbers (integer or floating point), "
                f"got {predictions.dtype} and {references.dtype}"
            )
        if predictions.shape != references.shape:
            raise self.error(
                f"predictions have shape {tuple(predictions.shape)} but references have shape "
                f"{tuple(references.shape)}"
            )
        if references.get_device() != predictions.get_device():
            references = references.to(predictions.device)
        difference = predictions.double() - references.double()
        return self._error(difference).sum(), difference.numel()

    def result(self, *totals: Tensor) -> float:
        errors, elements = totals
        return float(errors) / int(elements)


class MeanSquaredError(_ElementwiseError):
    """The mean of ``(prediction - reference) ** 2`` over every element of every sample.

    ``add_batch(predictions, references)`` takes two tensors of the same shape ``(n, ...)``,
    integer or floating point; the arithmetic is in float64. ``compute()`` returns
    ``{name: mse}``; the name defaults to ``"mse"``.
    """

    default_name = "mse"

    def _error(self, difference: Tensor) -> Tensor:
        return difference.square()


class MeanAbsoluteError(_ElementwiseError):
    """The mean of ``|prediction - reference|`` over every element of every sample.

    ``add_batch(predictions, references)`` takes two tensors of the same shape ``(n, ...)``,
    integer or floating point; the arithmetic is in float64. ``compute()`` returns
    ``{name: mae}``; the name defaults to ``"mae"``.
    """

    default_name = "mae"

    def _error(self, difference: Tensor) -> Tensor:
        return difference.abs()
