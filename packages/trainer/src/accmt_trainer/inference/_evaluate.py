"""``Trainer.evaluate``: sets through the module's ``test_step`` (else ``validation_step``) and
their metrics, on any number of processes, each sample once."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from accmt_callbacks import CallbackHandler
from accmt_state import TrainingState

from .._errors import TrainerConfigError
from .._module import check_module, overrides
from ..console import logger
from ..data import check_not_empty, named_sets
from ..evaluation import Evaluation, MetricsOption, Results, metrics_per_set
from ..runtime import start_trackers
from ._job import Weights, inference_job, inference_loader

if TYPE_CHECKING:
    from torch.utils.data import Dataset

    from .._module import AcceleratorModule, LogValues
    from ._options import InferenceOptions

TEST_SET = "test"
"""The name a single dataset is evaluated under (the ``key`` its step is given)."""


def evaluate(
    options: InferenceOptions,
    module: AcceleratorModule,
    data: Dataset[Any] | Mapping[str, Dataset[Any]],
    metrics: MetricsOption,
    weights: Weights,
    *,
    state: TrainingState,
    log: LogValues,
) -> Results | dict[str, float]:
    """See :meth:`Trainer.evaluate`."""
    check_module(module, "Trainer.evaluate")
    sets = named_sets(data, default=TEST_SET)
    if not sets:
        raise TrainerConfigError("Trainer.evaluate(data={}): there is no set to evaluate")
    for key, dataset in sets.items():
        check_not_empty(dataset, f"Trainer.evaluate(data=...): set {key!r}: the dataset")
    chosen = options.evaluation_options.metrics if metrics is None else metrics
    # Each sample is seen once: the metrics have nothing to drop (num_samples=None).
    per_set = metrics_per_set(chosen, dict.fromkeys(sets))
    method = "test_step" if overrides(module, "test_step") else "validation_step"
    job = inference_job(options, module, weights, "Trainer.evaluate", state=state, log=log)
    with job as accelerator:
        loaders = {
            key: inference_loader(
                accelerator, options, module, dataset, f"Trainer.evaluate: set {key!r}"
            )
            for key, dataset in sets.items()
        }
        tracking = options.logging_options
        start_trackers(accelerator, tracking, options.hps.to_dict())

        def log_results(values: Mapping[str, float]) -> None:
            if accelerator.is_main_process:
                shown = ", ".join(f"{name}={value:.6g}" for name, value in values.items())
                logger.info("evaluate: %s", shown)
            if tracking.log_with:
                logged = {f"evaluate/{name}": value for name, value in values.items()}
                accelerator.log(logged, step=state.global_step)

        # The run's callbacks and counters are the fit's: evaluate fires no hook and counts
        # nothing of the run.
        counters, no_callbacks = TrainingState(), CallbackHandler()
        no_callbacks.bind(module=module, state=counters)
        evaluation = Evaluation(
            accelerator,
            module,
            loaders,
            per_set,
            no_callbacks,
            counters,
            monitor=tracking.monitor,
            log=log_results,
            options=options.evaluation_options,
            method=method,
        )
        results = evaluation.evaluate()
    return results if isinstance(data, Mapping) else results[TEST_SET]
