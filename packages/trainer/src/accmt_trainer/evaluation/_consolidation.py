"""Metric consolidation: several logged validation values reported as one (their mean).

``consolidate_metrics`` picks values by a flat name that holds the set: ``<metric>`` with one
validation set and ``<metric>__<set>`` with several (the loss being ``valid_loss``), so that one
predicate such as ``lambda name: name.startswith("accuracy")`` picks a metric across sets. It
changes what is logged, never the state or what a saving rule reads.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs

from .._errors import TrainerConfigError

Predicate = Callable[[str], bool]
Extra = Callable[[dict[str, list[float]]], Mapping[str, Any]]


def flat_name(dataset: str, name: str, several_sets: bool) -> str:
    """The flat name that predicates read for the value ``name`` of validation set
    ``dataset``."""
    base = "valid_loss" if name == "loss" else name
    return f"{base}__{dataset}" if several_sets else base


def _check_predicates(instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, Mapping) or not all(
        isinstance(name, str) and callable(predicate) for name, predicate in value.items()
    ):
        raise TrainerConfigError(
            "Trainer(consolidate_metrics=...): expected {name: predicate}, each predicate "
            "taking a logged name such as 'accuracy' or 'accuracy__set' and returning a bool, "
            f"got {value!r}"
        )


@attrs.frozen(kw_only=True)
class MetricConsolidation:
    """``consolidate``: the mean of the values whose flat name a predicate accepts is logged
    under the predicate's name; the values it took are then not logged on their own, unless
    ``report_all``. ``additional`` gets ``{name: [values]}`` and returns more values to log."""

    consolidate: Mapping[str, Predicate] = attrs.field(validator=_check_predicates)
    additional: Extra | None = None
    report_all: bool = False

    def check(self, reported: Mapping[str, Iterable[str]]) -> None:
        """Each predicate takes at least one of the names the validation sets report."""
        names = self._flat_names(reported)
        for name, predicate in self.consolidate.items():
            if not any(predicate(flat) for flat in names):
                raise TrainerConfigError(
                    f"Trainer(consolidate_metrics=...): {name!r} takes none of the logged "
                    f"values {sorted(names)}"
                )

    def logged(
        self, results: Mapping[str, Mapping[str, float]], logged: Mapping[str, float]
    ) -> dict[str, float]:
        """What to log instead of ``logged`` (``<set>/<name>`` from ``results``)."""
        several = len(results) > 1
        groups: dict[str, list[float]] = {name: [] for name in self.consolidate}
        taken: set[str] = set()
        for dataset, values in results.items():
            for name, value in values.items():
                key = f"{dataset}/{name}"
                if key not in logged:
                    continue
                flat = flat_name(dataset, name, several)
                for consolidated, predicate in self.consolidate.items():
                    if predicate(flat):
                        groups[consolidated].append(value)
                        taken.add(key)
        out = {k: v for k, v in logged.items() if self.report_all or k not in taken}
        groups = {name: values for name, values in groups.items() if values}
        if self.additional is not None and groups:
            out.update(self._additional(groups))
        out.update({name: math.fsum(values) / len(values) for name, values in groups.items()})
        return out

    def _additional(self, groups: dict[str, list[float]]) -> dict[str, float]:
        assert self.additional is not None
        extra = self.additional({name: list(values) for name, values in groups.items()})
        if not isinstance(extra, Mapping):
            raise TrainerConfigError(
                "Trainer(additional_metric_consolidation=...): expected it to return a dict of "
                f"names to numbers, got {type(extra).__name__}"
            )
        return {str(name): float(value) for name, value in extra.items()}

    @staticmethod
    def _flat_names(reported: Mapping[str, Iterable[str]]) -> list[str]:
        several = len(reported) > 1
        return [flat_name(d, name, several) for d, names in reported.items() for name in names]


def make_consolidation(
    consolidate: Mapping[str, Predicate] | None,
    additional: Extra | None,
    report_all: bool,
) -> MetricConsolidation | None:
    """The Trainer's three consolidation options as one; None when nothing is consolidated."""
    if additional is not None and not callable(additional):
        raise TrainerConfigError(
            f"Trainer(additional_metric_consolidation=...): expected a function, got {additional!r}"
        )
    if consolidate is None:
        return None
    return MetricConsolidation(
        consolidate=consolidate, additional=additional, report_all=report_all
    )
