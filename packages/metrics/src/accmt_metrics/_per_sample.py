"""Metrics that keep one column entry per sample, for results that need the samples themselves."""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from ._base import Metric, MetricOptions
from ._order import interleaved_positions
from ._sync import ColumnSpec, common_columns, gather_objects, gather_rows, process_group_world

if TYPE_CHECKING:
    from typing_extensions import Unpack


class PerSampleMetric(Metric):
    """A metric that needs every sample: a median, a rank statistic such as AUROC.

    It keeps, per process, one small column entry per real sample, so its memory grows with the
    evaluation set, and :meth:`compute` gathers every process's columns to every process. Prefer
    :class:`SummedMetric` whenever the result is a function of sums. A subclass implements the
    math in two hooks:

    - :meth:`per_sample` turns one batch (its real samples only: padding is already dropped)
      into one or more *columns*, tensors whose first dimension is the batch's samples (for
      example one float per sample: "how far off was it?").
    - :meth:`reduce` turns the columns of every sample of the whole set into the result. The
      samples come in dataset order when the batches were dealt as Accelerate's prepared
      dataloaders deal them (local batch ``k`` of process ``p`` is global batch
      ``k * world_size + p``), so a float sum adds the same values in the same order as one
      process.
    """

    # Chunks of columns, one per batch until _local_columns() joins them into one; and the
    # number of real samples of each batch added (0 for those all padding), for the order.
    _chunks: list[tuple[Tensor, ...]]
    _sizes: list[int]

    def __init__(self, **options: Unpack[MetricOptions]) -> None:
        super().__init__(**options)
        self._clear_columns()

    @abc.abstractmethod
    def per_sample(self, predictions: Tensor, references: Tensor) -> Sequence[Tensor]:
        """One batch's columns: tensors whose first dimension has one entry per sample.

        ``predictions`` and ``references`` are detached, have the same number of rows (at
        least one), and hold only real samples. Validate dtypes and shapes here, raising
        ``self.error(...)``, and avoid anything that waits for the device (``.item()``,
        ``.tolist()``): this runs once per batch.
        """

    @abc.abstractmethod
    def reduce(self, *columns: Tensor) -> float | dict[str, float]:
        """The result over every sample of the set, given their columns.

        A float becomes ``{self.name: value}``; a dict is returned as it is.
        """

    def compute(self) -> dict[str, float]:
        process = process_group_world(self.sync)
        columns = self._local_columns()
        sizes = self._kept_sizes()
        specs = tuple(ColumnSpec(c.dtype, tuple(c.shape[1:])) for c in columns) or None
        layouts = gather_objects((self._counts(), sizes, specs), process)
        self._check_counts([counts for counts, _, _ in layouts])
        if process is not None:
            held = [(rank, spec) for rank, (_, _, spec) in enumerate(layouts) if spec]
            agreed = common_columns(held, self.error)
            if not columns:
                columns = tuple(torch.empty(0, *s.sample_shape, dtype=s.dtype) for s in agreed)
            every_sizes = [process_sizes for _, process_sizes, _ in layouts]
            device = columns[0].device
            gathered = gather_rows(columns, agreed, [sum(s) for s in every_sizes], process, device)
            order = _dataset_order(every_sizes).to(gathered[0].device)
            columns = tuple(column.index_select(0, order) for column in gathered)
        value = self.reduce(*columns)
        if isinstance(value, dict):
            return {str(key): float(item) for key, item in value.items()}
        return {self.name: float(value)}

    def reset(self) -> None:
        super().reset()
        self._clear_columns()

    def state_dict(self) -> dict[str, Any]:
        """This process's columns (on the CPU), batch sizes and sample counts."""
        return {
            **super().state_dict(),
            "columns": [column.cpu() for column in self._local_columns()],
            "kept_sizes": self._kept_sizes(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        columns = state.get("columns") if isinstance(state, dict) else None
        sizes = state.get("kept_sizes") if isinstance(state, dict) else None
        if not isinstance(columns, list) or not isinstance(sizes, list):
            raise self.error("load_state_dict() was given something state_dict() did not write")
        rows = sum(sizes) if all(isinstance(size, int) and size >= 0 for size in sizes) else -1
        if any(not isinstance(column, Tensor) or column.shape[0] != rows for column in columns):
            raise self.error("load_state_dict() was given batch sizes that do not fit its columns")
        super().load_state_dict(state)
        if len(sizes) != self._batches or rows != self._counts()[2]:
            self.reset()
            raise self.error("load_state_dict() was given batch sizes that do not fit its counts")
        if rows:
            self._chunks = [tuple(columns)]
            self._sizes = list(sizes)

    def _clear_columns(self) -> None:
        self._chunks = []
        self._sizes = []

    def _add(self, predictions: Tensor, references: Tensor) -> None:
        rows = predictions.shape[0]
        columns = tuple(self.per_sample(predictions, references))
        for column in columns:
            if not isinstance(column, Tensor) or column.ndim == 0 or column.shape[0] != rows:
                raise self.error(f"per_sample() must return tensors with {rows} rows")
        if self._chunks:
            first = self._chunks[0]
            if len(first) != len(columns) or any(
                a.shape[1:] != b.shape[1:] for a, b in zip(first, columns, strict=True)
            ):
                raise self.error(
                    "every batch must have the same per-sample shape; got "
                    f"{[tuple(c.shape[1:]) for c in columns]} after "
                    f"{[tuple(c.shape[1:]) for c in first]}"
                )
        self._chunks.append(columns)
        self._sizes += [0] * (self._batches - 1 - len(self._sizes))
        self._sizes.append(rows)

    def _kept_sizes(self) -> list[int]:
        """The number of real samples of every batch added, in order."""
        return self._sizes + [0] * (self._batches - len(self._sizes))

    def _local_columns(self) -> tuple[Tensor, ...]:
        """This process's columns, each joined into one tensor (and kept so)."""
        if len(self._chunks) > 1:
            device = self._chunks[-1][0].device
            joined = tuple(
                torch.cat([chunk[i].to(device) for chunk in self._chunks])
                for i in range(len(self._chunks[0]))
            )
            self._chunks = [joined]
        return self._chunks[0] if self._chunks else ()


def _dataset_order(sizes: Sequence[Sequence[int]]) -> Tensor:
    """Which gathered row (processes one after the other) stands at each dataset position."""
    positions = torch.cat(interleaved_positions(sizes))
    order = torch.empty(positions.shape[0], dtype=torch.int64)
    order[positions] = torch.arange(positions.shape[0])
    return order
