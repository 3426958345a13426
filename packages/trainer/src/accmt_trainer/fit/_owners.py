"""The owners of one ``fit``, each made from its own options object around the run's state:
who does what for the loop."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

import attrs

from accmt_callbacks import CallbackHandler

from ..checkpointing import Checkpoints, SavingRule
from ..console import ProgressBar
from ..evaluation import Evaluation, TrainingLosses
from ..runtime import StepProfiler, StopSignals
from ._best_models import BestModels, choose_rules
from ._nonfinite import NonFiniteGuard
from ._optimizer_step import OptimizerStep
from ._options import FitOptions
from ._setup import PreparedRun
from ._stop_agreement import StopAgreement
from ._weight_average import WeightAverage

if TYPE_CHECKING:
    from accmt_state import TrainingState

    from .._module import AcceleratorModule, LogValues


@attrs.define(kw_only=True)
class Owners:
    """Who does what for the loop."""

    optimizer_step: OptimizerStep
    evaluation: Evaluation
    best_models: BestModels
    checkpoints: Checkpoints
    nonfinite_guard: NonFiniteGuard
    progress: ProgressBar
    stop: StopAgreement
    """The run's one stop decision, agreed by every process."""
    profiler: StepProfiler
    """``profile_steps``: told each global step the run reaches."""
    losses: TrainingLosses
    """This process's training loss windows (since the last log, over the epoch)."""
    average: WeightAverage | None = None
    """The weight average (``ema_decay``): updated after each optimizer step, applied while
    the run evaluates and saves its best models."""


def build_owners(
    options: FitOptions,
    run: PreparedRun,
    module: AcceleratorModule,
    state: TrainingState,
    callbacks: CallbackHandler,
    checkpoints: Checkpoints,
    *,
    saving_rules: Mapping[str, SavingRule],
    log: LogValues,
    average: WeightAverage | None = None,
    signals: StopSignals | None = None,
) -> Owners:
    """The owners of one run around ``state``; ``log`` sends values to its trackers;
    ``signals`` are the stop signals the run catches (which the stop agreement tells)."""
    accelerator, step_options = run.accelerator, options.step_options
    logging_options = options.logging_options
    nonfinite_guard = NonFiniteGuard(step_options.on_nonfinite_loss, accelerator)
    best = options.best_model_options
    best_models = BestModels(
        accelerator,
        run.model,
        state,
        choose_rules(saving_rules, best.disable_model_saving, bool(run.val_loaders)),
        best,
        model_path=options.model_path,
        greater_is_better=_greater_is_better(run),
        nonfinite_guard=nonfinite_guard,
        request_stop=callbacks.request_stop,
    )
    optimizer_step = OptimizerStep(
        accelerator,
        run.model,
        run.optimizer,
        run.scheduler,
        callbacks,
        state,
        step_options,
        scheduler_per_epoch=options.hps.step_scheduler_per_epoch,
        grad_norm_every=logging_options.log_every if logging_options.monitor.grad_norm else None,
    )
    evaluation = Evaluation(
        accelerator,
        module,
        run.val_loaders,
        run.val_metrics,
        callbacks,
        state,
        monitor=logging_options.monitor,
        log=log,
        options=options.evaluation_options,
    )
    return Owners(
        optimizer_step=optimizer_step,
        evaluation=evaluation,
        best_models=best_models,
        checkpoints=checkpoints,
        nonfinite_guard=nonfinite_guard,
        progress=ProgressBar(logging_options.progress_bar, accelerator.is_main_process),
        stop=StopAgreement(callbacks, accelerator.num_processes, signals),
        profiler=StepProfiler(
            options.profile_steps,
            logging_options.profiles,
            process_index=accelerator.process_index,
            device=accelerator.device.type,
            total_steps=run.total_steps,
        ),
        losses=TrainingLosses.on(accelerator.device),
        average=average,
    )


def _greater_is_better(run: PreparedRun) -> Callable[[str], bool]:
    directions = {m.name: bool(m.greater_is_better) for ms in run.val_metrics.values() for m in ms}
    return lambda metric: directions.get(metric, False)
