"""accmt 1.x's custom metrics (``compute(predictions, references)``) on the exact 2.x Metric.

A 1.x metric overrides ``compute(*arguments)`` and gets every sample's arguments at once. Here
each batch's arguments (tensors, or dicts of tensors) become the per-sample columns of an
``accmt_metrics.Metric``, which gathers them from every process, drops Accelerate's padding and
puts them in dataset order; ``reduce`` then rebuilds the arguments and calls the 1.x
``compute``. So a 1.x metric gives on N processes what it gives on one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import torch
from torch import Tensor

import accmt_metrics

# One 1.x argument: a tensor (None) or a dict of tensors (its keys, in order).
_Layout = tuple[tuple[str, ...] | None, ...]


class Metric(accmt_metrics.PerSampleMetric):
    """accmt 1.x's ``Metric``: subclass it and override ``compute``::

        class Accuracy(Metric):
            def compute(self, predictions, references):
                return {"accuracy": (predictions == references).float().mean()}

        Trainer(..., metrics=[Accuracy("accuracy")])

    ``validation_step`` returns ``{"accuracy": (predictions, references)}`` (any number of
    arguments, each a tensor or a dict of tensors, one row per sample), and ``compute``
    receives each argument concatenated over the whole validation set, from every process, in
    dataset order, without the samples Accelerate repeats: the result is exact and the same on
    every process (1.x computed on the main process only). Values may be floats, ints, 0-d
    tensors or numpy scalars. ``metric.compute(predictions, references)`` called directly runs
    the 1.x math as it is.

    ``name`` is the metric's name; ``main_metric`` (default: ``name``) is the key of
    ``validation_step``'s dict and of the value that best-model rules compare, better when
    greater if ``greater_is_better``. Floating-point arguments are cast to ``cast`` (float32 by
    default; None keeps them). ``do_checks`` is accepted for 1.x programs: every batch is
    checked. ``num_samples`` and ``sync`` are the 2.x base class's.

    A subclass may instead implement the 2.x hooks ``per_sample`` and ``reduce``
    (:class:`accmt_metrics.PerSampleMetric`).
    """

    # The 1.x math of the subclass (its compute override), called by reduce.
    _compute_1x: ClassVar[Any] = None

    def __init__(
        self,
        name: str | None = None,
        greater_is_better: bool | None = None,
        main_metric: str | None = None,
        do_checks: bool = True,
        cast: torch.dtype | str | None = torch.float32,
        *,
        num_samples: int | None = None,
        sync: bool = True,
    ) -> None:
        super().__init__(
            name=main_metric or name,
            greater_is_better=greater_is_better,
            num_samples=num_samples,
            sync=sync,
        )
        self.main_metric = self.name
        self.do_checks = do_checks
        self.cast = getattr(torch, cast) if isinstance(cast, str) else cast
        self._argument_layout: _Layout | None = None
        self._pending: tuple[Tensor, ...] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # A 1.x subclass overrides compute with its math; keep that math for reduce, and let
        # compute() with no argument be the 2.x collective that the Trainer calls.
        own = cls.__dict__.get("compute")
        if own is not None and own is not Metric.__dict__["compute"]:
            cls._compute_1x = own
            cls.compute = Metric.__dict__["compute"]  # type: ignore[method-assign]

    def compute(self, *arguments: Any) -> dict[str, float]:
        """With no argument: the result over every sample added on every process (a
        collective). With arguments: the 1.x math on them, as 1.x's ``compute`` did."""
        if arguments:
            return self._run_1x(*arguments)
        return super().compute()

    def clear(self) -> None:
        """accmt 1.x's name for :meth:`reset`."""
        self.reset()

    def add_batch(
        self, predictions: Any, references: Any = None, *more: Any, mask: Tensor | None = None
    ) -> None:
        """Add one batch of 1.x arguments: tensors or dicts of tensors, one row per sample."""
        if _overrides_2x_hooks(self):
            super().add_batch(predictions, references, mask=mask)
            return
        given = (predictions,) if references is None else (predictions, references, *more)
        layout, columns = self._columns(given)
        before = self._argument_layout
        if before is not None and layout != before:
            raise self.error(f"the arguments changed form between batches: {layout} after {before}")
        self._argument_layout = layout
        # The base class drops padding rows, then calls per_sample with the rows it kept: give
        # it the rows' positions, and per_sample hands back those rows of these columns.
        self._pending = self._extra_columns(columns)
        positions = torch.arange(columns[0].shape[0], device=columns[0].device)
        try:
            super().add_batch(positions, positions, mask=mask)
        finally:
            self._pending = ()

    def reset(self) -> None:
        super().reset()
        self._argument_layout = None

    def per_sample(self, predictions: Tensor, references: Tensor) -> tuple[Tensor, ...]:
        kept = predictions.to(self._pending[0].device) if self._pending else predictions
        return tuple(column.index_select(0, kept) for column in self._pending)

    def reduce(self, *columns: Tensor) -> float | dict[str, float]:
        return self._run_1x(*self._arguments(columns))

    # --- the machinery ------------------------------------------------------------------------

    def _extra_columns(self, columns: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
        return columns

    def _run_1x(self, *arguments: Any) -> dict[str, float]:
        math = type(self)._compute_1x
        if math is None:
            raise NotImplementedError(
                f"{type(self).__name__} must override compute(predictions, references) "
                "(accmt 1.x) or per_sample and reduce (accmt 2.x)"
            )
        result = math(self, *arguments)
        if not isinstance(result, Mapping):
            raise self.error(f"compute() must return a dict of values, got {type(result).__name__}")
        return {str(key): float(value) for key, value in result.items()}

    def _columns(self, given: tuple[Any, ...]) -> tuple[_Layout, tuple[Tensor, ...]]:
        layout: list[tuple[str, ...] | None] = []
        columns: list[Tensor] = []
        for position, argument in enumerate(given):
            if isinstance(argument, Tensor):
                layout.append(None)
                columns.append(self._column(argument, f"argument {position}"))
            elif isinstance(argument, Mapping):
                keys = tuple(argument)
                layout.append(tuple(str(key) for key in keys))
                columns.extend(
                    self._column(argument[k], f"argument {position}[{k!r}]") for k in keys
                )
            else:
                raise self.error(
                    f"argument {position} is a {type(argument).__name__}; 1.x metrics take tensors "
                    "or dicts of tensors"
                )
        rows = {column.shape[0] for column in columns}
        if len(rows) != 1:
            raise self.error(
                f"every argument must have one row per sample; got {sorted(rows)} rows"
            )
        return tuple(layout), tuple(columns)

    def _column(self, value: Any, what: str) -> Tensor:
        if not isinstance(value, Tensor) or value.ndim == 0:
            raise self.error(f"{what} must be a tensor with one row per sample")
        column = value.detach()
        if column.is_floating_point() and self.cast is not None:
            column = column.to(self.cast)
        return column

    def _arguments(self, columns: tuple[Tensor, ...]) -> list[Any]:
        """The 1.x arguments rebuilt from the columns, in the layout they were added with."""
        arguments: list[Any] = []
        remaining = iter(columns)
        for keys in self._argument_layout or ():
            if keys is None:
                arguments.append(next(remaining))
            else:
                arguments.append({key: next(remaining) for key in keys})
        return arguments


class MetricParallel(Metric):
    """accmt 1.x's ``MetricParallel``. 1.x averaged per-process results; now that every
    metric gathers its samples exactly once per ``compute``, it is :class:`Metric`."""


class MetricBatch(Metric):
    """accmt 1.x's ``MetricBatch``: ``compute`` runs on each batch, and the result is the mean
    of the batches' results, as in 1.x. The batches are the validation set's global batches
    (those one process would see, with Accelerate's repeated samples dropped), so the result
    on N processes is the single-process one."""

    def _extra_columns(self, columns: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
        # Each sample's position in its batch: the batches start where it is 0.
        rows = columns[0].shape[0]
        return (*columns, torch.arange(rows, device=columns[0].device))

    def reduce(self, *columns: Tensor) -> float | dict[str, float]:
        *values, positions = columns
        starts = torch.nonzero(positions == 0).flatten().tolist()
        ends = [*starts[1:], positions.shape[0]]
        totals: dict[str, float] = {}
        for start, end in zip(starts, ends, strict=True):
            batch = tuple(column[start:end] for column in values)
            for key, value in self._run_1x(*self._arguments(batch)).items():
                totals[key] = totals.get(key, 0.0) + value
        return {key: total / len(starts) for key, total in totals.items()}


def _overrides_2x_hooks(metric: Metric) -> bool:
    return type(metric).per_sample is not Metric.per_sample
