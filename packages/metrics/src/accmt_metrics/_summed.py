"""Metrics that keep sums over the samples: memory that does not grow with the evaluation set."""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from ._base import Metric, MetricOptions
from ._sync import gather_objects, process_group_world

if TYPE_CHECKING:
    from typing_extensions import Unpack

# Floating-point dtypes that a running sum may not be kept in: each batch's sum would round.
_ROUNDED = frozenset({torch.float16, torch.bfloat16, torch.float32})

# What statistics() may return for one batch: a tensor, or a Python number (a count the batch's
# shape already gives needs no tensor, and so no work on the device).
Statistic = Tensor | int | float


class SummedMetric(Metric):
    """A metric computed from sums over the samples (sufficient statistics).

    Memory stays the same whatever the number of samples, and :meth:`compute` exchanges only
    the sums: one small gather of a few numbers per process. Use this style whenever the
    result is a function of sums over the samples (counts, sums of errors, confusion counts). A
    subclass implements the math in two hooks:

    - :meth:`statistics` turns one batch (its real samples only: padding is already dropped)
      into its sums: tensors of any fixed shape, or Python numbers.
    - :meth:`result` turns the sums over every sample of every process into the result.

    Exactness: integer and bool tensors are added up as int64 and Python ints as Python ints,
    so counts are exact; floating-point tensors must be float64 (sum with
    ``x.sum(dtype=torch.float64)``, else a float32 sum would round at every batch) and Python
    floats are float64. The processes' sums are added in process order, so every process gets
    the very same numbers, equal to one process's up to the order float64 additions are made.
    """

    def __init__(self, **options: Unpack[MetricOptions]) -> None:
        super().__init__(**options)
        self._totals: list[Statistic] | None = None

    @abc.abstractmethod
    def statistics(self, predictions: Tensor, references: Tensor) -> Sequence[Statistic]:
        """One batch's sums, always the same number of them, each of one shape.

        ``predictions`` and ``references`` are detached, have the same number of rows (at
        least one), and hold only real samples. Validate dtypes and shapes here, raising
        ``self.error(...)``, and avoid anything that waits for the device (``.item()``,
        ``.tolist()``, ``int(tensor)``): this runs once per batch.
        """

    @abc.abstractmethod
    def result(self, *totals: Tensor) -> float | dict[str, float]:
        """The result from the sums over every sample of every process.

        Each total comes as a CPU tensor: int64 for integer statistics, float64 for floating
        ones. Divide counts as Python numbers (``int(correct) / int(total)``): torch divides
        two int64 tensors in float32. A float becomes ``{self.name: value}``; a dict is
        returned as it is.
        """

    def compute(self) -> dict[str, float]:
        process = process_group_world(self.sync)
        local = (self._counts(), None if self._totals is None else _on_cpu(self._totals))
        gathered = gather_objects(local, process)
        self._check_counts([counts for counts, _ in gathered])
        held = [totals for _, totals in gathered if totals is not None]
        totals = [_add_up([totals[i] for totals in held]) for i in range(len(held[0]))]
        value = self.result(*totals)
        if isinstance(value, dict):
            return {str(key): float(item) for key, item in value.items()}
        return {self.name: float(value)}

    def reset(self) -> None:
        super().reset()
        self._totals = None

    def state_dict(self) -> dict[str, Any]:
        """This process's sums (on the CPU) and sample counts."""
        totals = None if self._totals is None else _on_cpu(self._totals)
        return {**super().state_dict(), "totals": totals}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        totals = state.get("totals") if isinstance(state, dict) else None
        if totals is not None and (
            not isinstance(totals, list)
            or not all(isinstance(total, (Tensor, int, float)) for total in totals)
        ):
            raise self.error("load_state_dict() was given sums that state_dict() did not write")
        super().load_state_dict(state)
        self._totals = None if totals is None else [_owned(total) for total in totals]

    def _add(self, predictions: Tensor, references: Tensor) -> None:
        self._accumulate(self.statistics(predictions, references))

    def _accumulate(self, statistics: Sequence[Statistic]) -> None:
        """Add one batch's statistics to the running totals."""
        totals = self._totals
        if totals is None:
            self._totals = [self._first_total(i, value) for i, value in enumerate(statistics)]
            return
        if len(statistics) != len(totals):
            raise self.error(
                f"statistics() returned {len(statistics)} values after {len(totals)} before"
            )
        for i, value in enumerate(statistics):
            total = totals[i]
            # The common cases in a few attribute reads: a tensor added in place to a tensor
            # of its dtype and shape, a number to a number. Anything else (another dtype, shape
            # or device, a number meeting a tensor) goes the slow way.
            if total.__class__ is Tensor:
                if (
                    value.__class__ is Tensor
                    and value.dtype is total.dtype
                    and value.shape == total.shape
                ):
                    try:
                        total.add_(value)
                    except RuntimeError:  # on another device
                        totals[i] = self._combined(i, total, value)
                else:
                    totals[i] = self._combined(i, total, value)
            elif value.__class__ is Tensor:
                totals[i] = self._combined(i, total, value)
            else:
                totals[i] = total + value

    def _combined(self, i: int, total: Statistic, value: Statistic) -> Tensor:
        """``total + value`` where they are not two tensors of one shape, dtype and device: a
        Python number with a 0-d tensor, tensors on two devices (after ``load_state_dict``), or
        int64 counts meeting float64 sums."""
        if isinstance(value, Tensor) and value.dtype in _ROUNDED:
            raise self._not_float64(i, value)
        tensors = [item for item in (total, value) if isinstance(item, Tensor)]
        if (len(tensors) == 2 and total.shape != value.shape) or (  # type: ignore[union-attr]
            len(tensors) == 1 and tensors[0].ndim
        ):
            raise self._changed(i, value, total)
        floating = any(
            item.dtype.is_floating_point if isinstance(item, Tensor) else isinstance(item, float)
            for item in (total, value)
        )
        dtype = torch.float64 if floating else torch.int64
        device = tensors[-1].device
        return torch.as_tensor(total, dtype=dtype, device=device).add_(value)

    def _first_total(self, i: int, value: Statistic) -> Statistic:
        if isinstance(value, Tensor):
            if value.dtype.is_complex:
                raise self.error(f"statistics() value {i} is complex; sums must be real")
            if value.dtype in _ROUNDED:
                raise self._not_float64(i, value)
            dtype = torch.float64 if value.dtype.is_floating_point else torch.int64
            return value.to(dtype, copy=True)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.error(
                f"statistics() value {i} is a {type(value).__name__}; "
                "give a tensor or a Python int or float"
            )
        return _owned(value)

    def _changed(self, i: int, value: Statistic, total: Statistic) -> Exception:
        return self.error(
            f"statistics() value {i} changed from {_describe(total)} to {_describe(value)}; "
            "every batch must give statistics of the same kind and shape"
        )

    def _not_float64(self, i: int, value: Tensor) -> Exception:
        return self.error(
            f"statistics() value {i} is {value.dtype}: sum floats in float64 "
            "(x.sum(dtype=torch.float64)), or the sums round at every batch"
        )


def _owned(value: Statistic) -> Statistic:
    """A running total of our own: a tensor is copied so that adding to it in place never
    writes into the caller's tensor."""
    return value.clone() if isinstance(value, Tensor) else value


def _on_cpu(totals: Sequence[Statistic]) -> list[Statistic]:
    return [total.cpu() if isinstance(total, Tensor) else total for total in totals]


def _describe(value: Statistic) -> str:
    if isinstance(value, Tensor):
        return f"a {value.dtype} tensor of shape {tuple(value.shape)}"
    return f"a Python {type(value).__name__}"


def _add_up(values: Sequence[Statistic]) -> Tensor:
    """The processes' totals of one statistic, added in process order, as a CPU tensor.

    Totals of different shapes (counts per class that grew with the labels seen, say) are
    zero-padded to the largest, aligned at index 0 of every dimension.
    """
    tensors = [
        value.clone()
        if isinstance(value, Tensor)
        else torch.tensor(value, dtype=torch.int64 if isinstance(value, int) else torch.float64)
        for value in values
    ]
    if len(tensors) == 1:
        return tensors[0]
    shape = [max(sizes) for sizes in zip(*(t.shape for t in tensors), strict=True)]
    dtype = tensors[0].dtype
    for tensor in tensors[1:]:
        dtype = torch.promote_types(dtype, tensor.dtype)
    total = torch.zeros(shape, dtype=dtype)
    for tensor in tensors:
        total[tuple(slice(0, size) for size in tensor.shape)] += tensor
    return total
