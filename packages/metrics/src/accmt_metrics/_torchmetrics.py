"""Any torchmetrics metric behind the :class:`Metric` interface; torchmetrics stays optional."""

from __future__ import annotations

import re
import warnings
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist
from torch import Tensor

from accmt_decorators import ProcessInfo

from ._base import Metric, take
from ._errors import MetricError
from ._sync import communication_device, process_group_world

if TYPE_CHECKING:
    import torchmetrics


class TorchMetricsAdapter(Metric):
    """Wrap a ``torchmetrics.Metric`` so that it is fed, padded and read like the built-ins.

    torchmetrics is imported only when an adapter is built, and is not a dependency of
    accmt-metrics: install it yourself.

    How it composes with torchmetrics' own synchronisation. :meth:`add_batch` drops the padding
    (``num_samples``, ``mask``: the same rules as every :class:`Metric`) and ``update``\\ s the
    wrapped metric with this process's real samples only, so the adapter holds whatever the
    wrapped metric holds (sums for most, every sample for the few that need them) and nothing
    else. :meth:`compute` checks the sample counts of every process (one small
    ``all_reduce``), then calls the wrapped metric's ``compute()``, which synchronises its
    states across processes the way torchmetrics does (``sync_on_compute=True``, the default;
    leave ``dist_sync_on_step`` False). Each sample is therefore counted once, on the process
    that holds it, and every process gets the single-process result, up to the order in which
    torchmetrics adds up float states. A wrapped metric built with ``sync_on_compute=False``
    computes over each process's own samples, and so does the adapter. The wrapped metric is
    moved to the device of the tensors it is fed.

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
        predictions, references = _detach(predictions), _detach(references)
        selection, placed = self._select(rows, mask)
        if selection is not None:
            predictions = _take(predictions, selection)
            references = _take(references, selection)
            rows = _length(predictions) or 0
            self._masked += placed - rows
        if rows:
            self._add(predictions, references)

    def compute(self) -> dict[str, float]:
        """The wrapped metric over the real samples of every process (a collective)."""
        self._check_counts(_summed_counts(self._counts(), process_group_world(self.sync)))
        with warnings.catch_warnings():
            # After load_state_dict() the wrapped metric holds samples it was not updated with.
            warnings.filterwarnings("ignore", message=".*was called before the ``update``")
            return _flatten(self.name, self.metric.compute())

    def reset(self) -> None:
        super().reset()
        if hasattr(self, "metric"):
            self.metric.reset()

    def state_dict(self) -> dict[str, Any]:
        """The wrapped metric's states (its ``metric_state``, on the CPU) and the counts."""
        states = {key: _cpu(value) for key, value in self.metric.metric_state.items()}
        return {**super().state_dict(), "states": states}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        states = state.get("states") if isinstance(state, dict) else None
        if not isinstance(states, dict) or set(states) != set(self.metric.metric_state):
            raise self.error("load_state_dict() was given something state_dict() did not write")
        super().load_state_dict(state)
        # What torchmetrics' own load_state_dict does for each state it keeps.
        for key, value in states.items():
            setattr(self.metric, key, value)

    def _add(self, predictions: Any, references: Any) -> None:
        if isinstance(predictions, Tensor) and predictions.device != self.metric.device:
            self.metric.to(predictions.device)
        self.metric.update(predictions, references)


def _summed_counts(
    counts: tuple[int, int, int], process: ProcessInfo | None
) -> list[tuple[int, int, int]]:
    """Every process's sample counts, added up, with one ``all_reduce`` when there are several."""
    if process is None:
        return [counts]
    device = communication_device(torch.device("cpu"))
    summed = torch.tensor(counts, dtype=torch.int64, device=device)
    dist.all_reduce(summed)
    added, placed, kept = summed.tolist()
    return [(added, placed, kept)]


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


def _take(value: Any, selection: int | Tensor) -> Any:
    if isinstance(value, Tensor) or isinstance(selection, int):
        return take(value, selection) if isinstance(value, Tensor) else value[:selection]
    return [item for item, kept in zip(value, selection.tolist(), strict=True) if kept]


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
