"""Mean squared and mean absolute error."""

from __future__ import annotations

import abc
import math

from torch import Tensor

from ._base import Metric
from ._dtypes import is_real


class _ElementwiseError(Metric):
    """The mean over samples of each sample's mean elementwise error.

    Every sample has the same shape in practice, and then this is the mean over every element,
    as scikit-learn's ``multioutput="uniform_average"``; one float64 per sample is kept.
    """

    default_greater_is_better = False

    @abc.abstractmethod
    def _error(self, difference: Tensor) -> Tensor:
        """The error of each element, from ``predictions - references`` in float64."""

    def per_sample(self, predictions: Tensor, references: Tensor) -> tuple[Tensor, ...]:
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
        difference = predictions.double() - references.to(predictions.device).double()
        return (sample_means(self._error(difference)),)

    def reduce(self, *columns: Tensor) -> float:
        (errors,) = columns
        return float(errors.mean())


def sample_means(values: Tensor) -> Tensor:
    """Each sample's mean over its elements (the values themselves when a sample is a scalar)."""
    if values.ndim == 1:
        return values
    return values.reshape(values.shape[0], math.prod(values.shape[1:])).mean(dim=1)


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
