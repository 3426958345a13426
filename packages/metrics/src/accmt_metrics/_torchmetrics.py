"""Any torchmetrics metric behind the :class:`Metric` interface; torchmetrics stays optional."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from ._base import Metric
from ._errors import MetricError

if TYPE_CHECKING:
    import torchmetrics


class TorchMetricsAdapter(Metric):
    """Wrap a ``torchmetrics.Metric`` so that it is fed, padded and read like the built-ins.

    torchmetrics is imported only when an adapter is built, and is not a dependency of
    accmt-metrics: install it yourself.

    How it composes with torchmetrics' own synchronisation. :meth:`add_batch` keeps the raw
    batches (tensors or, for text metrics, lists) on this process. :meth:`compute` exchanges
    only the batch sizes with the other processes, to learn which of this process's samples are
    padding (``num_samples``, ``mask``: the same rules as every :class:`Metric`), then resets
    the wrapped metric, ``update``\\ s it with this process's real samples only, and calls its
    ``compute()``, which synchronises the metric's states across processes the way torchmetrics
    does (``sync_on_compute=True``, the default; leave ``dist_sync_on_step`` False). Each sample
    is therefore counted once, on the process that holds it, and every process gets the
    single-process result, up to the order in which torchmetrics adds up float states. A wrapped
    metric built with ``sync_on_compute=False`` computes over each process's own samples, and so
    does the adapter. The wrapped metric is moved to the device of the tensors it is fed.

    ``compute()`` returns ``{name: value}`` for a scalar result; a tensor of several values
    becomes ``{f"{name}_{i}": ...}`` (flattened), a dict ``{f"{name}_{key}": ...}``.

    Args:
        metric: the ``torchmetrics.Metric`` to wrap.
        name: defaults to the metric's class name in snake case
            (``MulticlassAccuracy`` gives ``"multiclass_accuracy"``).
        greater_is_better: defaults to the metric's ``higher_is_better``; required when that is
            ``None``.
        num_samples: as for every :class:`Metric`.
    """

    def __init__(
        self,
        metric: torchmetrics.Metric,
        name: str | None = None,
        greater_is_better: bool | None = None,
        *,
        num_samples: int | None = None,
    ) -> None:
        try:
            import torchmetrics
        except ImportError as error:
            raise ImportError(
                "TorchMetricsAdapter needs torchmetrics, which accmt-metrics does not install: "
                "pip install torchmetrics"
            ) from error
        label = f"TorchMetricsAdapter({type(metric).__name__})"
        if not isinstance(metric, torchmetrics.Metric):
            raise MetricError(f"{label}: expected a torchmetrics.Metric")
        if greater_is_better is None:
            greater_is_better = metric.higher_is_better
            if greater_is_better is None:
                raise MetricError(
                    f"{label}: the metric does not say whether higher is better; "
                    "pass greater_is_better="
                )
        super().__init__(
            name=_snake_case(type(metric).__name__) if name is None else name,
            greater_is_better=greater_is_better,
            num_samples=num_samples,
            sync=bool(metric.sync_on_compute),
        )
        self.metric = metric
        self._raw: list[tuple[Any, Any]] = []

    def add_batch(self, predictions: Any, references: Any, *, mask: Tensor | None = None) -> None:
        """Add one batch, in whatever form the wrapped metric's ``update`` takes (tensors or
        sequences), with one row per sample."""
        rows = _length(predictions)
        if rows is None:
            raise self.error(
                f"predictions must be a tensor or a sequence, got {type(predictions).__name__}"
            )
        if _length(references) != rows:
            raise self.error(
                f"predictions have {rows} rows but references have {_length(references)}"
            )
        self._raw.append((_detach(predictions), _detach(references)))
        self._append((), rows, mask)

    def compute(self) -> dict[str, float]:
        """The wrapped metric over the real samples of every process (a collective)."""
        keep = self._kept_local_rows()
        kept = None if keep is None else torch.split(keep, self._batch_sizes)
        self.metric.reset()
        for index, (predictions, references) in enumerate(self._raw):
            if kept is not None:
                predictions = _take(predictions, kept[index])
                references = _take(references, kept[index])
            if not _length(predictions):
                continue
            if isinstance(predictions, Tensor) and predictions.device != self.metric.device:
                self.metric.to(predictions.device)
            self.metric.update(predictions, references)
        return _flatten(self.name, self.metric.compute())

    def reset(self) -> None:
        super().reset()
        self._raw = []
        if hasattr(self, "metric"):
            self.metric.reset()

    def state_dict(self) -> dict[str, Any]:
        """The raw batches kept on this process, on the CPU, and their sizes and masks."""
        return {**super().state_dict(), "raw": [tuple(map(_cpu, batch)) for batch in self._raw]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        raw = state.get("raw") if isinstance(state, dict) else None
        if not isinstance(raw, list) or len(raw) != len(state.get("batch_sizes", ())):
            raise self.error("load_state_dict() was given something state_dict() did not write")
        super().load_state_dict(state)
        self._raw = [tuple(batch) for batch in raw]

    def per_sample(self, predictions: Tensor, references: Tensor) -> tuple[Tensor, ...]:
        """Not used: the wrapped metric keeps its own state."""
        raise NotImplementedError("TorchMetricsAdapter feeds the wrapped metric directly")

    def reduce(self, *columns: Tensor) -> float:
        """Not used: the wrapped metric computes its own result."""
        raise NotImplementedError("TorchMetricsAdapter feeds the wrapped metric directly")


def _snake_case(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


def _length(value: Any) -> int | None:
    if isinstance(value, Tensor):
        return int(value.shape[0]) if value.ndim else None
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return len(value)
    return None


def _detach(value: Any) -> Any:
    return value.detach() if isinstance(value, Tensor) else value


def _cpu(value: Any) -> Any:
    return value.cpu() if isinstance(value, Tensor) else value


def _take(value: Any, keep: Tensor) -> Any:
    if isinstance(value, Tensor):
        return value[keep.to(value.device)]
    return [item for item, kept in zip(value, keep.tolist(), strict=True) if kept]


def _flatten(name: str, value: Any) -> dict[str, float]:
    if isinstance(value, Tensor):
        if value.numel() == 1:
            return {name: float(value)}
        return {f"{name}_{i}": float(v) for i, v in enumerate(value.flatten().tolist())}
    if isinstance(value, Mapping):
        flat: dict[str, float] = {}
        for key, item in value.items():
            flat.update(_flatten(f"{name}_{key}", item))
        return flat
    if isinstance(value, (list, tuple)):
        flat = {}
        for i, item in enumerate(value):
            flat.update(_flatten(f"{name}_{i}", item))
        return flat
    return {name: float(value)}
