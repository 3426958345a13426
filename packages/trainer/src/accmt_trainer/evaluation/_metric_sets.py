"""Each validation set's own copies of the metrics the Trainer was given."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from accmt_metrics import Metric

from .._errors import TrainerConfigError

MetricsOption = Metric | Sequence[Metric] | Mapping[str, Metric | Sequence[Metric]] | None


def metrics_per_set(
    metrics: MetricsOption, val_sets: Mapping[str, int | None]
) -> dict[str, list[Metric]]:
    """Each set's own copies of its metrics, sized to the samples an evaluation of the set
    gives (``val_sets``: set -> that number, None when unknown)."""
    if isinstance(metrics, Mapping):
        unknown = set(metrics) - set(val_sets)
        if unknown:
            raise TrainerConfigError(
                f"Trainer(metrics=...): no validation set named {sorted(unknown)}; "
                f"the sets are {sorted(val_sets)}"
            )
        chosen = {key: _metric_list(metrics.get(key)) for key in val_sets}
    else:
        chosen = {key: _metric_list(metrics) for key in val_sets}
    # Each set accumulates into its own copies, so one set's batches never mix with another's.
    per_set = {key: [copy.deepcopy(metric) for metric in ms] for key, ms in chosen.items()}
    for key, ms in per_set.items():
        for metric in ms:
            metric.num_samples = val_sets[key]
    return per_set


def _metric_list(metrics: Any) -> list[Metric]:
    if metrics is None:
        return []
    if isinstance(metrics, Metric):
        return [metrics]
    if not isinstance(metrics, Iterable) or isinstance(metrics, str):
        raise TrainerConfigError(
            f"Trainer(metrics=...): expected a Metric, a list of them, or a dict of them by "
            f"validation set, got {type(metrics).__name__} {metrics!r}"
        )
    listed = list(metrics)
    for metric in listed:
        if not isinstance(metric, Metric):
            raise TrainerConfigError(
                f"Trainer(metrics=...): expected accmt_metrics.Metric instances, got "
                f"{type(metric).__name__} {metric!r}"
            )
    return listed
