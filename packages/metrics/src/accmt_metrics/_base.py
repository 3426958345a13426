"""The Metric base class: accumulation, padding removal and the one synchronisation per compute."""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import Any, ClassVar, TypedDict

import torch
from torch import Tensor

from accmt_decorators import ProcessInfo

from ._errors import MetricError
from ._order import interleaved_positions
from ._sync import (
    ColumnSpec,
    Layout,
    common_columns,
    exchange_layouts,
    gather_rows,
    process_group_world,
)

_STATE_FORMAT = 1


class MetricOptions(TypedDict, total=False):
    """The keyword arguments every metric's constructor takes (see :class:`Metric`)."""

    name: str | None
    greater_is_better: bool | None
    num_samples: int | None
    sync: bool


class Metric(abc.ABC):
    """A metric over a whole evaluation set, exact when the set is split across processes.

    Feed it batch by batch with :meth:`add_batch`, read it with :meth:`compute`, start over with
    :meth:`reset`. The base class keeps the samples, drops padding, and synchronises the
    processes once per :meth:`compute`; a subclass implements only the math, in two hooks:

    - :meth:`per_sample` turns one batch into one or more *columns*, tensors whose first
      dimension is the batch's samples (for example one bool per sample: "was it correct?").
    - :meth:`reduce` turns the columns of every sample of the whole set, in dataset order, into
      the result.

    On several processes (an initialised ``torch.distributed`` group of world size > 1, as
    reported by ``accmt_decorators.current_process()``) :meth:`compute` gathers every process's
    columns, so :meth:`reduce` sees exactly the samples, in exactly the order, that one process
    would have seen; the result is the same on every process. :meth:`compute` is therefore a
    collective: every process must call it. It never resets, and calling it twice gives the same
    result.

    Padding. Accelerate's prepared dataloaders repeat samples from the start of the dataset so
    that every process gets the same number of batches. Say which samples are real in one of
    two ways:

    - ``num_samples`` (the true dataset length): the samples are put back in the order a prepared
      dataloader deals them (local batch ``k`` of process ``p`` is global batch
      ``k * world_size + p``, padding last) and cut to the first ``num_samples``, as
      ``Accelerator.gather_for_metrics`` does. This assumes each :meth:`add_batch` call gets
      exactly one batch of such a dataloader (``split_batches`` or not, ``even_batches`` or not).
    - ``mask=`` on :meth:`add_batch`: a bool per sample, ``False`` for padding. Use it with any
      other sampler (a ``DistributedSampler`` pads differently).

    When both are used, the first ``num_samples`` positions are kept (masked samples still count
    as positions), then masked samples are dropped.

    Args:
        name: the key of the result in :meth:`compute`'s dict; defaults to the class's
            ``default_name``.
        greater_is_better: whether a larger value is better (for best-model selection and early
            stopping); defaults to the class's ``default_greater_is_better``.
        num_samples: the true number of samples of the evaluation set, or ``None``; may also be
            set later through the attribute of the same name.
        sync: ``False`` computes over this process's samples only, with no collective.
    """

    default_name: ClassVar[str] = "metric"
    default_greater_is_better: ClassVar[bool] = True

    name: str
    greater_is_better: bool
    num_samples: int | None
    sync: bool

    def __init__(
        self,
        *,
        name: str | None = None,
        greater_is_better: bool | None = None,
        num_samples: int | None = None,
        sync: bool = True,
    ) -> None:
        self.name = type(self).default_name if name is None else name
        if not isinstance(self.name, str) or not self.name:
            raise MetricError(f"{type(self).__name__}: name must be a non-empty string")
        if greater_is_better is None:
            greater_is_better = type(self).default_greater_is_better
        self.greater_is_better = bool(greater_is_better)
        self.num_samples = num_samples
        self.sync = sync
        # Chunks of columns with their masks and row counts: one per batch until
        # _local_columns() joins them into one. The batch sizes are kept apart, for the order.
        self._chunks: list[tuple[Tensor, ...]] = []
        self._masks: list[Tensor | None] = []
        self._chunk_rows: list[int] = []
        self._batch_sizes: list[int] = []

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"

    # --- the two hooks a subclass implements --------------------------------------------------

    @abc.abstractmethod
    def per_sample(self, predictions: Tensor, references: Tensor) -> tuple[Tensor, ...]:
        """One batch's columns: tensors whose first dimension has one entry per sample.

        ``predictions`` and ``references`` are detached and have the same number of rows (the
        base class checked). Validate dtypes and shapes here, raising ``self.error(...)``, and
        avoid anything that waits for the device (``.item()``, ``.tolist()``): this runs once
        per batch.
        """

    @abc.abstractmethod
    def reduce(self, *columns: Tensor) -> float | dict[str, float]:
        """The result over every sample of the set, given their columns in dataset order.

        A float becomes ``{self.name: value}``; a dict is returned as it is.
        """

    # --- the public interface -----------------------------------------------------------------

    def add_batch(
        self, predictions: Tensor, references: Tensor, *, mask: Tensor | None = None
    ) -> None:
        """Add one batch: ``predictions`` and ``references`` with one row per sample.

        Tensors may live on any device; nothing here waits for the device. ``mask`` is an
        optional bool tensor with one entry per sample, ``False`` marking padding to drop.
        """
        predictions = self._tensor(predictions, "predictions")
        references = self._tensor(references, "references")
        rows = self._rows(predictions, "predictions")
        if self._rows(references, "references") != rows:
            raise self.error(
                f"predictions have {rows} rows but references have {references.shape[0]}"
            )
        self._append(self.per_sample(predictions, references), rows, mask)

    def compute(self) -> dict[str, float]:
        """The result over every sample added on every process, as plain floats.

        A collective on several processes (see the class documentation). Raises
        :class:`MetricError` if no sample was added anywhere.
        """
        result = self.reduce(*self._all_columns())
        if isinstance(result, dict):
            return {str(key): float(value) for key, value in result.items()}
        return {self.name: float(result)}

    def reset(self) -> None:
        """Forget every batch added; the configuration (name, ``num_samples``) stays."""
        self._chunks = []
        self._masks = []
        self._chunk_rows = []
        self._batch_sizes = []

    def error(self, message: str) -> MetricError:
        """A :class:`MetricError` naming this metric; for subclasses to raise."""
        return MetricError(f"{self!r}: {message}")

    def state_dict(self) -> dict[str, Any]:
        """This process's accumulated batches, on the CPU, for ``torch.save``.

        It is this process's share only (nothing is synchronised): in a job of several
        processes, each saves and loads its own.
        """
        columns, mask = self._local_columns()
        return {
            "format": _STATE_FORMAT,
            "metric": type(self).__name__,
            "batch_sizes": list(self._batch_sizes),
            "columns": [column.cpu() for column in columns],
            "mask": None if mask is None else mask.cpu(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Replace the accumulated batches by those of :meth:`state_dict`."""
        if not isinstance(state, dict) or state.get("format") != _STATE_FORMAT:
            raise self.error("load_state_dict() was given something state_dict() did not write")
        if state.get("metric") != type(self).__name__:
            raise self.error(f"load_state_dict() was given the state of a {state.get('metric')}")
        sizes = state["batch_sizes"]
        columns = tuple(state["columns"])
        mask = state["mask"]
        rows = sum(sizes)
        if not all(isinstance(size, int) and size >= 0 for size in sizes) or any(
            not isinstance(column, Tensor) or column.shape[0] != rows for column in columns
        ):
            raise self.error("load_state_dict() was given batch sizes that do not fit its columns")
        if mask is not None and (not isinstance(mask, Tensor) or mask.shape != (rows,)):
            raise self.error("load_state_dict() was given a mask that does not fit its columns")
        self.reset()
        if sizes:
            self._chunks = [columns]
            self._masks = [mask]
            self._chunk_rows = [rows]
            self._batch_sizes = list(sizes)

    # --- the machinery ------------------------------------------------------------------------

    def _tensor(self, value: Any, what: str) -> Tensor:
        if not isinstance(value, Tensor):
            raise self.error(f"{what} must be a torch.Tensor, got {type(value).__name__}")
        return value.detach()

    def _rows(self, value: Tensor, what: str) -> int:
        if value.ndim == 0:
            raise self.error(f"{what} must have one row per sample, got a 0-d tensor")
        return int(value.shape[0])

    def _append(self, columns: Sequence[Tensor], rows: int, mask: Tensor | None) -> None:
        """Keep one batch of ``rows`` samples: its columns and its mask."""
        columns = tuple(columns)
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
        if mask is not None:
            if not isinstance(mask, Tensor) or mask.dtype != torch.bool:
                raise self.error("mask must be a bool tensor, False marking padding")
            if mask.shape != (rows,):
                raise self.error(
                    f"mask has shape {tuple(mask.shape)} but the batch has {rows} samples"
                )
            mask = mask.detach()
        self._chunks.append(columns)
        self._masks.append(mask)
        self._chunk_rows.append(rows)
        self._batch_sizes.append(rows)

    def _local_columns(self) -> tuple[tuple[Tensor, ...], Tensor | None]:
        """This process's columns and mask, each joined into one tensor (and kept so)."""
        if not self._chunks:
            return (), None
        if len(self._chunks) > 1:
            device = _device(self._chunks[-1], self._masks[-1])
            columns = tuple(
                torch.cat([chunk[i].to(device) for chunk in self._chunks])
                for i in range(len(self._chunks[0]))
            )
            mask = None
            if any(m is not None for m in self._masks):
                mask = torch.cat(
                    [
                        torch.ones(rows, dtype=torch.bool, device=device)
                        if m is None
                        else m.to(device)
                        for m, rows in zip(self._masks, self._chunk_rows, strict=True)
                    ]
                )
            self._chunks, self._masks = [columns], [mask]
            self._chunk_rows = [sum(self._chunk_rows)]
        return self._chunks[0], self._masks[0]

    def _layouts(
        self, columns: Sequence[Tensor], mask: Tensor | None
    ) -> tuple[list[Layout], ProcessInfo | None]:
        """Every process's layout (just this one's when computing alone), and the job."""
        specs = None
        if self._batch_sizes:
            specs = tuple(ColumnSpec(c.dtype, tuple(c.shape[1:])) for c in columns)
        local = Layout(list(self._batch_sizes), specs, mask is not None)
        process = process_group_world(self.sync)
        if process is None:
            return [local], None
        return exchange_layouts(local, process), process

    def _kept_positions(self, layouts: Sequence[Layout]) -> tuple[int, list[Tensor] | None]:
        """The total of samples added anywhere, and each process's global positions (``None``
        when they are simply ``0 .. total - 1`` in process order)."""
        total = sum(sum(layout.batch_sizes) for layout in layouts)
        if total == 0:
            raise self.error("compute() was called before any sample was added")
        if self.num_samples is not None:
            if isinstance(self.num_samples, bool) or not isinstance(self.num_samples, int):
                raise self.error(f"num_samples must be an int, got {self.num_samples!r}")
            if not 0 < self.num_samples <= total:
                raise self.error(
                    f"num_samples={self.num_samples} but {total} samples were added "
                    f"across {len(layouts)} process(es); it must be between 1 and {total}"
                )
        if len(layouts) == 1:
            return total, None
        return total, interleaved_positions([layout.batch_sizes for layout in layouts])

    def _kept_local_rows(self) -> Tensor | None:
        """Which of this process's samples are real (a bool per sample, on the CPU), after the
        same exchange of batch sizes as :meth:`compute`; ``None`` when all of them are."""
        columns, mask = self._local_columns()
        layouts, process = self._layouts(columns, mask)
        _, positions = self._kept_positions(layouts)
        keep = None if mask is None else mask.cpu()
        if self.num_samples is not None:
            if positions is None:
                mine = torch.arange(sum(self._batch_sizes))
            else:
                mine = positions[0 if process is None else process.process_index]
            truncated = mine < self.num_samples
            keep = truncated if keep is None else keep & truncated
        return keep

    def _all_columns(self) -> tuple[Tensor, ...]:
        """Every sample's columns from every process, in dataset order, padding dropped."""
        columns, mask = self._local_columns()
        layouts, process = self._layouts(columns, mask)
        total, positions = self._kept_positions(layouts)
        if process is not None:
            specs = common_columns(layouts, self.error)
            assert specs is not None
            device = _device(columns, mask) if columns else torch.device("cpu")
            if not columns:
                columns = tuple(
                    torch.empty(0, *spec.sample_shape, dtype=spec.dtype) for spec in specs
                )
            gathered, mask = gather_rows(columns, mask, specs, layouts, process, device)
            columns = tuple(gathered)
        index = _dataset_order(total, positions, self.num_samples, mask, columns[0].device)
        if index is None:
            return columns
        if isinstance(index, slice):
            kept = tuple(column[index] for column in columns)
        else:
            kept = tuple(column.index_select(0, index) for column in columns)
        if kept[0].shape[0] == 0:
            raise self.error(f"the mask drops every one of the {total} samples added")
        return kept


def _dataset_order(
    total: int,
    positions: list[Tensor] | None,
    num_samples: int | None,
    mask: Tensor | None,
    device: torch.device,
) -> Tensor | slice | None:
    """Which rows, in which order, make the dataset: ``None`` for all of them as they are."""
    if positions is None:
        if mask is None:
            return None if num_samples is None else slice(0, num_samples)
        keep = mask.to(device)
        if num_samples is not None:
            keep = keep.clone()
            keep[num_samples:] = False
        return torch.nonzero(keep).flatten()
    order = torch.empty(total, dtype=torch.int64)
    order[torch.cat(positions)] = torch.arange(total)
    order = order.to(device)
    if num_samples is not None:
        order = order[:num_samples]
    if mask is not None:
        order = order[mask.to(device).index_select(0, order)]
    return order


def _device(columns: Sequence[Tensor], mask: Tensor | None) -> torch.device:
    if columns:
        return columns[0].device
    return torch.device("cpu") if mask is None else mask.device
