"""A running, optionally weighted, mean: of a loss, or of any value per sample."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from ._base import Metric
from ._dtypes import is_real


class Mean(Metric):
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
    Tensors may be on any device and are detached; nothing here waits for the device. The
    arithmetic is in float64. A negative weight, or a total weight of zero, raises at
    ``compute()``.

    ``compute()`` returns ``{name: mean}``; the name defaults to ``"mean"`` (pass
    ``name="loss"`` for a loss), and ``greater_is_better`` defaults to False.
    """

    default_name = "mean"
    default_greater_is_better = False

    def update(self, value: Tensor | float, weight: Tensor | float = 1.0) -> None:
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
        rows = values.shape[0]
        if weight is None or (isinstance(weight, (int, float)) and not isinstance(weight, bool)):
            # Made where the values are, so that a GPU loss needs no copy from the host.
            weights = torch.full(
                (rows,),
                1.0 if weight is None else float(weight),
                dtype=torch.float64,
                device=values.device,
            )
        else:
            weights = self._values(weight, "weight").to(values.device)
            if (
                weights.shape[0] == 1
                and rows != 1
                and isinstance(weight, Tensor)
                and weight.ndim == 0
            ):
                weights = weights.expand(rows)
            if weights.shape != values.shape:
                raise self.error(
                    f"weight has {weights.shape[0]} entries but there are {rows} values"
                )
        self._append(self.per_sample(values, weights), rows, mask)

    def _values(self, value: Tensor | float, what: str) -> Tensor:
        if isinstance(value, Tensor):
            value = value.detach()
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            value = torch.tensor(float(value), dtype=torch.float64)
        else:
            raise self.error(f"{what} must be a number or a tensor, got {type(value).__name__}")
        if not is_real(value.dtype):
            raise self.error(f"{what} must be real numbers, got {value.dtype}")
        if value.ndim > 1:
            raise self.error(
                f"{what} must be a scalar or one value per sample (1-D), got shape "
                f"{tuple(value.shape)}"
            )
        return value.reshape(-1)

    def per_sample(self, predictions: Tensor, references: Tensor) -> tuple[Tensor, ...]:
        """The values and the weights, in float64."""
        return predictions.double(), references.double()

    def reduce(self, *columns: Tensor) -> float:
        values, weights = columns
        total, lowest, weighted = torch.stack(
            [weights.sum(), weights.min(), (values * weights).sum()]
        ).tolist()
        if lowest < 0:
            raise self.error(f"a weight is negative ({lowest})")
        if total == 0:
            raise self.error("the weights add up to zero")
        return float(weighted / total)
