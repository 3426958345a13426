"""accmt 1.x's HyperParameterSearch, on accmt-search's
:class:`~accmt_search.HyperParameterSearch`, which it hands a 2.x space, data and objective."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from torch.utils.data import Dataset

import accmt_search
from accmt_search import EvaluationMetrics, SearchResult, SetMetrics

from ._search_space import ParametersSpace

if TYPE_CHECKING:
    from accmt_metrics import Metric
    from accmt_trainer import AcceleratorModule


class OneXSetMetrics(SetMetrics):
    """One validation set's results; ``metrics["valid_loss"]`` (accmt 1.x's name) reads
    ``"loss"``."""

    def __missing__(self, key: str) -> float:
        if key == "valid_loss" and "loss" in self:
            return self["loss"]
        return super().__missing__(key)


class OneXMetrics(EvaluationMetrics):
    """One evaluation's results as accmt 1.x read them: ``metrics["0"]`` is the first set (a
    list of validation datasets is named ``"0"``, ``"1"``, ...), and ``metrics["0"]["valid_loss"]``
    its loss."""

    def __init__(self, results: Mapping[str, Mapping[str, float]]) -> None:
        super().__init__(results)
        for key, values in self.items():
            self[key] = OneXSetMetrics(values, key)

    def __missing__(self, key: str) -> SetMetrics:
        if key == "0" and self:
            return next(iter(self.values()))
        return super().__missing__(key)


class HyperParameterSearch(accmt_search.HyperParameterSearch):
    """accmt-search's HyperParameterSearch that also takes accmt 1.x's calls:
    :meth:`set_parameters`, ``val_dataset`` as a list of datasets (named ``"0"``, ``"1"``, ...),
    and a ``best_metric_fn`` that reads ``metrics["0"]["valid_loss"]``::

        search = HyperParameterSearch(get_module_fn, train_dataset, val_dataset, metrics=None,
                                      **trainer_kwargs)
        search.set_parameters(train_batch_size=[16, 32, 64], epochs=3,
                              learning_rate=[1e-4, 1e-2], optimizer="AdamW")
        result = search.optimize(best_metric_fn=None, direction="minimize", n_trials=10)
    """

    def __init__(
        self,
        get_module_fn: Callable[..., AcceleratorModule],
        train_dataset: Dataset[Any],
        val_dataset: Dataset[Any] | Sequence[Dataset[Any]] | Mapping[str, Dataset[Any]],
        metrics: Sequence[Metric] | Mapping[str, Sequence[Metric]] | None = None,
        *,
        output_dir: str | os.PathLike[str] = "hp_search",
        **trainer_kwargs: Any,
    ) -> None:
        if (
            isinstance(val_dataset, (list, tuple))
            and val_dataset
            and all(isinstance(item, Dataset) for item in val_dataset)
        ):
            val_dataset = {str(index): dataset for index, dataset in enumerate(val_dataset)}
        super().__init__(
            get_module_fn,
            train_dataset,
            val_dataset,  # type: ignore[arg-type]
            metrics,
            output_dir=output_dir,
            **trainer_kwargs,
        )

    def set_parameters(
        self,
        *,
        train_batch_size: int | list[int] | tuple[int, ...] = 1,
        epochs: int | list[int] | tuple[int, ...] = 1,
        max_steps: int | list[int] | tuple[int, ...] | None = None,
        learning_rate: float | list[float] | tuple[float, ...] | None = None,
        beta1: float | list[float] | tuple[float, ...] = 0.9,
        beta2: float | list[float] | tuple[float, ...] = 0.999,
        eps: float | list[float] | tuple[float, ...] = 1e-08,
        weight_decay: float | list[float] | tuple[float, ...] = 0.01,
        scheduler: Any = None,
        warmup_ratio: float | list[float] | tuple[float, ...] = 0.1,
        step_scheduler_per_epoch: bool = False,
        optimizer: Any = "AdamW",
        eval_batch_size: int | list[int] | tuple[int, ...] | None = None,
    ) -> None:
        """Set the space as accmt 1.x did: a single value is fixed, a list of two numbers is a
        range (int for ``epochs`` and ``max_steps``; float otherwise, on a log scale for
        ``learning_rate`` and ``eps``), a tuple is a choice, a list of batch sizes is a choice,
        and a dict of schedulers (``{"linear": "LinearWithWarmup", ...}``) is a choice between
        them. ``learning_rate`` defaults to the range [1e-7, 1e-3] on a log scale. ``optimizer``
        is any optimizer ``HyperParameters`` takes; ``beta1``, ``beta2``, ``eps`` and
        ``weight_decay`` left at their defaults are dropped for an optimizer that does not take
        them, as ``warmup_ratio`` is for a scheduler without a warmup. Ranges and choices are
        checked now: errors name the parameter.

        The study stores each searched parameter under its 1.x name.
        """
        arguments = dict(locals())
        del arguments["self"]
        self.set_space(ParametersSpace.of(arguments))

    def optimize(
        self,
        best_metric_fn: Callable[[EvaluationMetrics], float] | None = None,
        direction: str = "minimize",
        n_trials: int = 10,
        **options: Any,
    ) -> SearchResult:
        """:meth:`accmt_search.HyperParameterSearch.optimize`; ``best_metric_fn`` also reads
        accmt 1.x's names: ``metrics["0"]`` is the first validation set, and
        ``metrics["0"]["valid_loss"]`` its loss."""
        objective = None if best_metric_fn is None else _one_x_objective(best_metric_fn)
        return super().optimize(objective, direction, n_trials, **options)


def _one_x_objective(
    best_metric_fn: Callable[[EvaluationMetrics], float],
) -> Callable[[EvaluationMetrics], float]:
    def objective(metrics: EvaluationMetrics) -> float:
        return best_metric_fn(OneXMetrics(metrics))

    return objective
