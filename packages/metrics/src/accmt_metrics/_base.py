"""The Metric base class: configuration, padding dropped as batches arrive, sample counts."""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import Any, ClassVar, TypedDict

import torch
from torch import Tensor

from accmt_decorators import current_process

from ._errors import MetricError
from ._order import rows_before

# Which rows of a batch are real: all of them (None), the first n (an int), or a bool per row.
Selection = int | Tensor | None

_STATE_FORMAT = 2
_COUNTERS = ("batches", "added", "unplaced", "masked")


class MetricOptions(TypedDict, total=False):
    """The keyword arguments every metric's constructor takes (see :class:`Metric`)."""

    name: str | None
    greater_is_better: bool | None
    num_samples: int | None
    sync: bool


class Metric(abc.ABC):
    """A metric over a whole evaluation set, exact when the set is split across processes.

    Feed it batch by batch with :meth:`add_batch`, read it with :meth:`compute`, start over with
    :meth:`reset`. A metric is written in one of two styles (see :class:`SummedMetric` and
    :class:`PerSampleMetric`): it keeps sums over the samples, whose size does not grow with
    the evaluation set, or one column per sample. This base class drops the padding and counts
    the samples; :meth:`compute` synchronises the processes once.

    On several processes (an initialised ``torch.distributed`` group of world size > 1, as
    reported by ``accmt_decorators.current_process()``) :meth:`compute` combines every process's
    share, so the result is the one a single process would get over the same samples, the same
    on every process. :meth:`compute` is therefore a collective: every process must call it. It
    never resets, and calling it twice gives the same result.

    Padding. Accelerate's prepared dataloaders repeat samples from the start of the dataset so
    that every process gets the same number of batches. Say which samples are real in one of
    two ways; either way the padding is dropped as each batch is added:

    - ``num_samples`` (the true dataset length): local batch ``k`` of process ``p`` is taken to
      be global batch ``k * world_size + p`` of a dataloader whose batches, but those of the
      last round, have one size, and the samples from position ``num_samples`` on are
      dropped, as ``Accelerator.gather_for_metrics`` does (on one process, batches of any
      sizes). This assumes each
      :meth:`add_batch` call gets exactly one batch of such a dataloader (``split_batches`` or
      not, ``even_batches`` or not, dispatched or not). :meth:`compute` checks that exactly
      ``num_samples`` samples were kept across the processes, and raises if not. Set it before
      the first batch; changing it while batches are held raises.
    - ``mask=`` on :meth:`add_batch`: a bool per sample, ``False`` for padding. Use it with any
      other sampler (a ``DistributedSampler`` pads differently). Selecting the rows of a CUDA
      batch by a mask waits for the device once per batch.

    When both are used, the first ``num_samples`` positions are kept (masked samples still count
    as positions), then masked samples are dropped.

    Args:
        name: the key of the result in :meth:`compute`'s dict; defaults to the class's
            ``default_name``.
        greater_is_better: whether a larger value is better (for best-model selection and early
            stopping); defaults to the class's ``default_greater_is_better``.
        num_samples: the true number of samples of the evaluation set, or ``None``; may also be
            set later through the attribute of the same name, before the first batch.
        sync: ``False`` computes over this process's samples only, with no collective;
            ``num_samples`` then counts this process's samples as if it were alone.
    """

    default_name: ClassVar[str] = "metric"
    default_greater_is_better: ClassVar[bool] = True

    name: str
    greater_is_better: bool
    sync: bool

    _batches: int  # add_batch calls since reset(): the position of the next batch
    _added: int  # samples given, padding included
    _unplaced: int  # samples dropped for standing at or after num_samples
    _masked: int  # samples before num_samples that the mask dropped
    _layout: tuple[int, int] | None  # (process index, world size), once num_samples needs it

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
        self.sync = sync
        self._clear_counters()
        self._num_samples: int | None = None
        self.num_samples = num_samples

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"

    @property
    def num_samples(self) -> int | None:
        """The true number of samples of the evaluation set, or ``None`` (see the class)."""
        return self._num_samples

    @num_samples.setter
    def num_samples(self, value: int | None) -> None:
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise self.error(f"num_samples must be an int or None, got {value!r}")
        if value is not None and value < 0:
            raise self.error(f"num_samples must not be negative, got {value}")
        if value != self._num_samples and self._batches:
            raise self.error(
                f"num_samples changed from {self._num_samples} to {value} after "
                f"{self._batches} batch(es) were added: it decides, as each batch is added, "
                "which samples are padding; set it before the first add_batch() or after reset()"
            )
        self._num_samples = value

    # --- the public interface -----------------------------------------------------------------

    def add_batch(
        self, predictions: Tensor, references: Tensor, *, mask: Tensor | None = None
    ) -> None:
        """Add one batch: ``predictions`` and ``references`` with one row per sample.

        Tensors may live on any device; nothing here waits for the device (but selecting rows
        by a CUDA ``mask``). ``mask`` is an optional bool tensor with one entry per sample,
        ``False`` marking padding to drop.
        """
        # Written out flat: at small batches this Python is a fair share of the cost.
        if not _tensors(predictions, references):
            raise self._not_tensors(predictions, references)
        if not predictions.ndim or not references.ndim:
            what = "predictions" if not predictions.ndim else "references"
            raise self.error(f"{what} must have one row per sample, got a 0-d tensor")
        rows = predictions.shape[0]
        if references.shape[0] != rows:
            raise self.error(
                f"predictions have {rows} rows but references have {references.shape[0]}"
            )
        if predictions.requires_grad:
            predictions = predictions.detach()
        if references.requires_grad:
            references = references.detach()
        selection, placed = self._select(rows, mask)
        if selection is not None:
            predictions = take(predictions, selection)
            references = take(references, selection)
            rows = predictions.shape[0]
            self._masked += placed - rows
        if rows:
            self._add(predictions, references)

    @abc.abstractmethod
    def compute(self) -> dict[str, float]:
        """The result over every real sample added on every process, as plain floats.

        A collective on several processes (see the class documentation). Raises
        :class:`MetricError` if no sample was added anywhere.
        """

    def reset(self) -> None:
        """Forget every batch added; the configuration (name, ``num_samples``) stays."""
        self._clear_counters()

    def error(self, message: str) -> MetricError:
        """A :class:`MetricError` naming this metric; for subclasses to raise."""
        return MetricError(f"{self!r}: {message}")

    def state_dict(self) -> dict[str, Any]:
        """This process's accumulated share, on the CPU, for ``torch.save``.

        It is this process's share only (nothing is synchronised): in a job of several
        processes, each saves and loads its own.
        """
        counters = (self._batches, self._added, self._unplaced, self._masked)
        return {
            "format": _STATE_FORMAT,
            "metric": type(self).__name__,
            **dict(zip(_COUNTERS, counters, strict=True)),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Replace the accumulated share by the one :meth:`state_dict` returned."""
        if not isinstance(state, dict) or state.get("format") != _STATE_FORMAT:
            raise self.error("load_state_dict() was given something state_dict() did not write")
        if state.get("metric") != type(self).__name__:
            raise self.error(f"load_state_dict() was given the state of a {state.get('metric')}")
        given = [state.get(key) for key in _COUNTERS]
        counters = [value for value in given if isinstance(value, int) and value >= 0]
        if len(counters) != len(_COUNTERS):
            raise self.error(f"load_state_dict() was given bad sample counts: {given}")
        self.reset()
        self._batches, self._added, self._unplaced, self._masked = counters

    # --- for the two styles -------------------------------------------------------------------

    @abc.abstractmethod
    def _add(self, predictions: Tensor, references: Tensor) -> None:
        """Accumulate one batch's real rows (at least one)."""

    def _clear_counters(self) -> None:
        self._batches = self._added = self._unplaced = self._masked = 0
        self._layout = None

    def _not_tensors(self, predictions: object, references: object) -> MetricError:
        what, value = ("predictions", predictions)
        if isinstance(predictions, Tensor):
            what, value = ("references", references)
        return self.error(f"{what} must be a torch.Tensor, got {type(value).__name__}")

    def _select(self, rows: int, mask: Tensor | None) -> tuple[Selection, int]:
        """Which of the next batch's ``rows`` samples are real, and how many stand before
        ``num_samples``. Counts them as added, and those after as unplaced; the caller counts
        what the mask drops (``_masked``), as it learns that in selecting the rows."""
        self._batches += 1
        if mask is None and self._num_samples is None:
            self._added += rows
            return None, rows
        placed = rows
        if self._num_samples is not None:
            if self._layout is None:
                self._layout = self._process_layout()
            process, world = self._layout
            placed = rows_before(self._num_samples, self._added, rows, process, world)
        self._added += rows
        self._unplaced += rows - placed
        if mask is None:
            return (None if placed == rows else placed), placed
        if not isinstance(mask, Tensor) or mask.dtype != torch.bool:
            raise self.error("mask must be a bool tensor, False marking padding")
        if mask.shape != (rows,):
            raise self.error(f"mask has shape {tuple(mask.shape)} but the batch has {rows} samples")
        if placed < rows:
            mask = mask.clone()
            mask[placed:] = False
        return mask, placed

    def _process_layout(self) -> tuple[int, int]:
        """This process's index and the number of processes, as the padding is laid out."""
        if not self.sync:
            return 0, 1
        process = current_process()
        return process.process_index, process.num_processes

    def _counts(self) -> tuple[int, int, int]:
        """What :meth:`_check_counts` needs from this process: the samples added, those before
        ``num_samples``, and those kept."""
        placed = self._added - self._unplaced
        return self._added, placed, placed - self._masked

    def _check_counts(self, counts: Sequence[tuple[int, int, int]]) -> None:
        """Raise unless the processes' ``_counts()`` describe a set :meth:`compute` can read."""
        added, placed, kept = (sum(column) for column in zip(*counts, strict=True))
        if added == 0:
            raise self.error("compute() was called before any sample was added")
        if self._num_samples is not None and placed != self._num_samples:
            where = f"across {len(counts)} process(es)"
            if added < self._num_samples:
                raise self.error(
                    f"num_samples={self._num_samples} but {added} samples were added {where}"
                )
            raise self.error(
                f"num_samples={self._num_samples} but {placed} of the {added} samples added "
                f"{where} stand before it in the order a prepared Accelerate dataloader deals "
                "batches: were they added one add_batch() per batch, in order, all of one size "
                "but those of the last round? For any other order, give mask= instead"
            )
        if kept == 0:
            if self._num_samples == 0:
                raise self.error("num_samples=0 leaves no sample to compute over")
            raise self.error(f"the mask drops every one of the {added} samples added")


def _tensors(first: object, second: object) -> bool:
    """Whether both are tensors (a function, so that type checkers do not take it as given)."""
    return isinstance(first, Tensor) and isinstance(second, Tensor)


def take(value: Tensor, selection: int | Tensor) -> Tensor:
    """The rows of ``value`` a :data:`Selection` keeps."""
    if isinstance(selection, int):
        return value[:selection]
    return value[selection.to(value.device)]
