"""Evaluation: every validation set through ``validation_step`` and its metrics, once."""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import attrs
import torch
from accelerate import Accelerator
from torch.utils.data import DataLoader

from accmt_callbacks import CallbackHandler
from accmt_metrics import Metric

from ..config import Monitor
from ..data import length_or_none
from ..runtime import reshard
from ._consolidation import Extra, MetricConsolidation, Predicate, make_consolidation
from ._documents import take_documents
from ._metric_sets import MetricsOption
from ._set_loss import SetLoss
from ._step_outputs import split_validation_output, validation_call

if TYPE_CHECKING:
    from accmt_state import TrainingState

    from .._module import AcceleratorModule

Results = dict[str, dict[str, float]]


@attrs.frozen(kw_only=True)
class EvaluationOptions:
    """The Trainer's options of evaluation: what it measures and how it reports (when it runs
    is the training loop's ``LoopOptions``)."""

    module_hooks: bool = True
    """Call the module's ``before_eval()`` and ``after_eval()`` around each evaluation."""
    metrics: MetricsOption = None
    """A Metric, a list of them, or a dict of them by validation set."""
    consolidate_metrics: Mapping[str, Predicate] | None = None
    """accmt 1.x's consolidated logging: a metric name -> the predicate its best set meets."""
    additional_metric_consolidation: Extra | None = None
    report_all_metrics: bool = False
    consolidation: MetricConsolidation | None = attrs.field(
        init=False, default=attrs.Factory(lambda self: self.consolidated(), takes_self=True)
    )
    """The three consolidation options as one (None when nothing is consolidated)."""

    def consolidated(self) -> MetricConsolidation | None:
        return make_consolidation(
            self.consolidate_metrics, self.additional_metric_consolidation, self.report_all_metrics
        )


class Evaluation:
    """Runs the validation sets and records what they reported in the TrainingState:
    ``additional_metrics`` (set -> name -> value, the loss as ``"loss"``: token-weighted where
    the step gives ``num_items``, see :class:`SetLoss`), ``best_valid_loss``
    (the mean over sets), ``evaluations_done`` and ``last_evaluation_step``."""

    def __init__(
        self,
        accelerator: Accelerator,
        module: AcceleratorModule,
        loaders: Mapping[str, DataLoader[Any]],
        metrics: Mapping[str, list[Metric]],
        callbacks: CallbackHandler,
        state: TrainingState,
        *,
        monitor: Monitor,
        log: Callable[[Mapping[str, float]], None],
        options: EvaluationOptions,
        method: str = "validation_step",
    ) -> None:
        self.accelerator = accelerator
        self.module = module
        self.loaders = dict(loaders)
        self.metrics = {key: {metric.name: metric for metric in ms} for key, ms in metrics.items()}
        self.callbacks = callbacks
        self.state = state
        self.monitor = monitor
        self.log = log
        self.options = options
        # Checked once: the step (validation_step, or test_step) takes (key, batch).
        self.validation_step = (
            validation_call(module, self.loaders, method) if self.loaders else None
        )

    @property
    def has_data(self) -> bool:
        return bool(self.loaders)

    def evaluated_current_weights(self) -> bool:
        """Whether the latest evaluation saw the weights of the current optimizer step."""
        return self.state.last_evaluation_step == self.state.global_step

    def evaluate(self) -> Results:
        """Evaluate every set; record and log the results. The loop fires the hooks around it."""
        with self._evaluating():
            results = {key: self._evaluate_set(key, loader) for key, loader in self.loaders.items()}
        self._record(results)
        return results

    @contextlib.contextmanager
    def _evaluating(self) -> Iterator[None]:
        """The model in eval mode without gradients, inside the module's eval hooks; a sharded
        model's parameters are left in their shards, as the forwards found them."""
        module, model = self.module, self.module.model
        if self.options.module_hooks:
            module.before_eval()
        model.eval()
        with torch.no_grad():
            yield
        reshard(model)
        model.train()
        if self.options.module_hooks:
            module.after_eval()

    def sanity_check(self) -> dict[str, list[str]]:
        """``validation_step`` and the metrics on the first batch of each set, without hooks
        or counters; the names each set reports. The metrics are left empty."""
        reported: dict[str, list[str]] = {}
        with self._evaluating():
            for key, loader in self.loaders.items():
                loss = self._set_loss(key)
                metrics = _unsized_copies(self.metrics[key])
                for batch in loader:
                    self._add_batch(key, batch, loss, metrics)
                    break
                # Leaving the loop early skips Accelerate's own end of the iteration.
                end = getattr(loader, "end", None)
                if end is not None:
                    end()
                reported[key] = sorted(self._values(loss, metrics, whole_set=False))
        if self.options.consolidation is not None:
            self.options.consolidation.check(reported)
        return reported

    def _set_loss(self, key: str) -> SetLoss:
        assert self.validation_step is not None  # there is a set, so there is the step
        return SetLoss(self.accelerator.device, self.validation_step.where(key))

    def _evaluate_set(self, key: str, loader: DataLoader[Any]) -> dict[str, float]:
        loss = self._set_loss(key)
        batches = length_or_none(loader)  # an IterableDataset's loader may not know
        state, call = self.state, self.callbacks.call
        for index, batch in enumerate(loader):
            state.is_last_validation_batch = index == (batches or 0) - 1
            call("on_before_validation_step", batch)
            self._add_batch(key, batch, loss, self.metrics[key])
            state.val_step += 1
            call("on_after_validation_step")
        return self._values(loss, self.metrics[key])

    def _add_batch(
        self, key: str, batch: Any, loss: SetLoss, metrics: Mapping[str, Metric]
    ) -> None:
        assert self.validation_step is not None  # there is a batch, so there are sets
        # A flattened batch's document_spans never reach the step: its per-token outputs are
        # cut back into documents for the metrics (the loss, a sum over tokens, needs no cut).
        batch, documents = take_documents(batch, loss.where)
        output = self.validation_step(key, batch)
        split = split_validation_output(loss.where, key, output, metrics)
        if split.loss is not None:
            loss.add(split.loss, split.items)
        for name, args in split.arguments.items():
            if documents is not None:
                args = documents.metric_arguments(args)
            metrics[name].add_batch(*args)

    def _values(
        self, loss: SetLoss, metrics: Mapping[str, Metric], *, whole_set: bool = True
    ) -> dict[str, float]:
        """The set's loss and metrics over every process; the metrics are reset."""
        values: dict[str, float] = {}
        mean = loss.reduce(self.accelerator, whole_set=whole_set)
        if mean is not None:
            values["loss"] = mean
        for metric in metrics.values():
            values.update(metric.compute())
            metric.reset()
        return values

    def _record(self, results: Results) -> None:
        state = self.state
        state.additional_metrics = results
        state.evaluations_done += 1
        state.last_evaluation_step = state.global_step
        losses = [values["loss"] for values in results.values() if "loss" in values]
        if losses:
            # With several sets, the run's validation loss is their mean.
            state.best_valid_loss = min(state.best_valid_loss, sum(losses) / len(losses))
        self.log(self._logged(results))

    def _logged(self, results: Results) -> dict[str, float]:
        monitor = self.monitor
        logged = {
            f"{key}/{name}": value
            for key, values in results.items()
            for name, value in values.items()
            if (monitor.validation_loss if name == "loss" else monitor.additional_metrics)
        }
        consolidation = self.options.consolidation
        return logged if consolidation is None else consolidation.logged(results, logged)


def _unsized_copies(metrics: Mapping[str, Metric]) -> dict[str, Metric]:
    """Copies that accept one batch: the set's true length does not apply to it."""
    copies = {name: copy.deepcopy(metric) for name, metric in metrics.items()}
    for metric in copies.values():
        metric.reset()
        metric.num_samples = None
    return copies
